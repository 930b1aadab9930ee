import { describe, expect, it } from 'vitest';
import { CliError } from '../src/client.js';
import { standaloneConfig } from '../src/commands/standalone.js';

// The standby count is read here (Lite's subprocess setting), the warm-pool guard in core: the
// same environment with standby agents boots on the defaults and is refused once warm pools are on.
describe('Lite standby agents vs the warm-pool guard', () => {
  const standby = { LEOFLOW_EXECUTION_STANDBY_AGENTS: '4' };

  it('standby agents boot on envvar + the default liveness (enforce) and on observe', async () => {
    const cfg = await standaloneConfig({}, standby);
    expect(cfg.subprocess.standbyAgents).toBe(4);
    expect(cfg.credentials).toMatchObject({
      warmPoolsEnabled: false,
      agentTokenTransport: 'envvar',
      secretLivenessMode: 'enforce',
    });
    const observe = await standaloneConfig(
      {},
      { ...standby, LEOFLOW_AUTH_SECRET_LIVENESS_MODE: 'observe' },
    );
    expect(observe.credentials.secretLivenessMode).toBe('observe');
  });

  it('warm pools beside them are refused, naming both keys', async () => {
    const err: unknown = await standaloneConfig(
      {},
      {
        ...standby,
        LEOFLOW_EXECUTION_WARM_POOLS_ENABLED: 'true',
        // named: the default liveness mode is enforce, which warm pools accept
        LEOFLOW_AUTH_SECRET_LIVENESS_MODE: 'observe',
      },
    ).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(CliError);
    expect(err).toMatchObject({ code: 'LF_CONFIG_INVALID' });
    const message = (err as Error).message;
    expect(message).toMatch(/auth\.agent_token_transport is "?envvar"?/);
    expect(message).toMatch(/auth\.secret_liveness_mode is "?observe"?/);
  });
});
