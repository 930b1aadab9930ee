/**
 * Process entry: `node packages/agent/dist/main.js`. The executor passes the per-attempt bearer
 * on fd 3 and everything else in a minimal env (see docs/agent.md for the full contract).
 */
import { Agent, EXIT } from './agent.js';
import { ConfigError, readConfig } from './config.js';
import { stderrDiagnostics } from './diag.js';
import { createAgentClient } from './rpc.js';
import { readTokenFromFd, TokenHolder } from './token.js';

const TOKEN_FD = 3;

async function main(): Promise<number> {
  const startedAt = Date.now();
  const diag = stderrDiagnostics();
  let agent: Agent | undefined;

  const onSignal = (signal: NodeJS.Signals): void => {
    if (!agent?.taskStarted) {
      diag.log('warn', `received ${signal} before the task started; exiting`);
      process.exit(EXIT.SIGNALLED);
    }
    agent.onSignal(signal);
  };
  for (const s of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(s, onSignal);

  // A crash must not leave the detached task group running with the attempt's secrets.
  const crash = (err: unknown): void => {
    diag.log(
      'error',
      `agent crashed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`,
    );
    agent?.killTaskGroupNow();
    process.exit(EXIT.FAILURE);
  };
  process.on('uncaughtException', crash);
  process.on('unhandledRejection', crash);

  let config;
  try {
    config = readConfig(process.env);
  } catch (err) {
    diag.log('error', err instanceof ConfigError ? err.message : String(err));
    return EXIT.BOOTSTRAP;
  }

  let token: string;
  try {
    token = await readTokenFromFd(TOKEN_FD, config.bootstrapDeadlineMs);
  } catch (err) {
    diag.log('error', `bootstrap failed: ${err instanceof Error ? err.message : String(err)}`);
    return EXIT.BOOTSTRAP;
  }
  const tokens = new TokenHolder(token);
  token = '';

  agent = new Agent({
    config,
    client: createAgentClient(config.agentUrl, tokens),
    tokens,
    diag,
    agentEnv: process.env,
    startedAt,
  });
  return agent.run();
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(
      `leoflow-agent: fatal: ${err instanceof Error ? err.message : String(err)}\n`,
    );
    process.exit(EXIT.FAILURE);
  },
);
