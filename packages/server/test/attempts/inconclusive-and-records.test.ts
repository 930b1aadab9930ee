import { create } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { ReportedState, ReportStateRequestSchema } from '@leoflow/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { schedulerTimings } from '../../src/boot/control-plane.js';
import { checkDeclarations } from '../../src/scheduler/dags/registration.js';
import { defaultServerConfig } from '../../src/config/server-config.js';
import {
  createHarness,
  spec,
  task,
  type Harness,
  type HarnessOptions,
} from '../support/harness.js';
import { access, heartbeat, report, setupVaultAndDag, startAttempt } from './support.js';

let h: Harness;
afterEach(async () => {
  await h?.close();
});

async function harness(opts: HarnessOptions = {}) {
  h = await createHarness({ scoping: 'enforce', liveness: 'enforce', ...opts });
  await setupVaultAndDag(h, { retries: 1 });
  return h;
}

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    return Code[ConnectError.from(err).code];
  }
}

describe('an inconclusive read never hurts a live task', () => {
  it('a datastore error during heartbeat neither terminates nor renews; the next beat renews; a stale attempt is still told to stop', async () => {
    await harness();
    const first = await startAttempt(h);
    const real = h.store.recordHeartbeat.bind(h.store);
    h.store.recordHeartbeat = () => Promise.reject(new Error('connection reset'));
    const blip = await heartbeat(h, first.token);
    expect(blip).toMatchObject({ shouldTerminate: false, renewedToken: '' });
    h.store.recordHeartbeat = real;
    const after = await heartbeat(h, first.token);
    expect(after?.shouldTerminate).toBe(false);
    expect(after?.renewedToken).not.toBe('');
    // the other side: once superseded, the recovered store says stop
    await report(h, first.token, 'failed');
    await startAttempt(h, 'cred', 'existing');
    expect((await heartbeat(h, first.token))?.shouldTerminate).toBe(true);
  });

  it.each(['observe', 'enforce'] as const)(
    'a missing run on the secret path is inconclusive (liveness %s): permissive delivers, enforce scoping answers Unavailable — never "no longer live"',
    async (liveness) => {
      for (const scoping of ['permissive', 'enforce'] as const) {
        await h?.close();
        await harness({ scoping, liveness });
        const a = await startAttempt(h);
        h.store.getRunSpecRef = () => Promise.resolve(undefined);
        if (scoping === 'permissive') {
          expect(await access(h, a.token)).toBe('delivered');
        } else {
          const err = await h
            .agent(a.token)
            .getVariables({})
            .then(
              () => undefined,
              (e: unknown) => ConnectError.from(e),
            );
          expect(err?.code).toBe(Code.Unavailable);
          expect(err?.rawMessage).toMatch(/declaration of this task could not be read.*retry/);
          const rec = await h.store.getAttemptRecord(a.identity.task_instance_id, 1);
          expect(rec?.variables_refusal).toBe('declaration_unreadable');
        }
        expect(
          await h.store.listAudit(
            'default',
            { action: 'secret.liveness_denied' },
            { limit: 5, offset: 0 },
          ),
        ).toEqual([]);
      }
    },
  );

  it('an unreadable spec under enforce: Unavailable while it fails, exactly the declared names once it reads again', async () => {
    await harness();
    const a = await startAttempt(h);
    const real = h.store.getDagVersion.bind(h.store);
    h.store.getDagVersion = () => Promise.reject(new Error('disk I/O error'));
    // The spec cache already holds version 1; point the run at an uncached version so the
    // spec must be read from the (failing) store.
    await h.store.setRunVersion(a.identity.dag_run_id, 99);
    expect(await codeOf(h.agent(a.token).getVariables({}))).toBe('Unavailable');
    h.store.getDagVersion = real;
    await h.store.setRunVersion(a.identity.dag_run_id, 1);
    expect((await h.agent(a.token).getVariables({})).variables).toEqual({ v1: 'one' });
  });
});

describe('registration refuses unknown declared names', () => {
  it('the variables half: unknown variables are named in order with the fix; known ones pass', async () => {
    h = await createHarness();
    const now = h.clock.now();
    await h.vault.setVariable('default', 'known', 'x', { secret: false }, now);
    const bad = spec({
      dag_id: 'vars',
      variables: ['zeta', 'known'],
      tasks: [task('t', { variables: ['alpha'] })],
    });
    await expect(checkDeclarations(h.store, 'default', bad)).rejects.toThrow(
      'dag "vars" declares unknown variable(s) zeta, alpha; define them (leoflow variables set <key> <value>)',
    );
    const good = spec({ dag_id: 'vars', variables: ['known'], tasks: [task('t')] });
    await expect(checkDeclarations(h.store, 'default', good)).resolves.toBeUndefined();
  });
});

describe('settling grace', () => {
  it('the control plane wires settling grace = 2 × agent-lost (the boot ladder value)', () => {
    const exec = defaultServerConfig('/tmp/unused').execution;
    expect(schedulerTimings(exec).settlingGraceMs).toBe(2 * exec.agentLostThresholdMs);
    expect(schedulerTimings({ ...exec, agentLostThresholdMs: 45_000 }).settlingGraceMs).toBe(
      90_000,
    );
  });
});

describe('per-try delivery record', () => {
  it('records modes, names delivered (never values), refusals, renewals and the final expiry, per attempt', async () => {
    await harness({ liveness: 'enforce' });
    const a = await startAttempt(h);
    await h.agent(a.token).getVariables({});
    await h.agent(a.token).getConnections({});
    h.clock.advance(15_000);
    const hb = await heartbeat(h, a.token, a.session);
    await report(h, hb!.renewedToken, 'failed');
    expect(await codeOf(h.agent(a.token).getVariables({}))).toBe('PermissionDenied');
    const b = await startAttempt(h, 'cred', 'existing');
    await h.agent(b.token).getVariables({});

    const recs = await h.store.listAttemptRecords(a.identity.dag_run_id, 't');
    expect(recs.map((r) => r.try_number)).toEqual([1, 2]);
    const [r1, r2] = recs;
    expect(r1).toMatchObject({
      scoping_mode: 'enforce',
      liveness_mode: 'enforce',
      variables_delivered: ['v1'],
      connections_delivered: [],
      variables_refusal: 'not_live',
      renewals: 1,
      renewal_stopped: null,
      credential_exp: (Math.floor(h.clock.now() / 1000) + 600) * 1000,
    });
    expect(r1!.session_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(r2).toMatchObject({ variables_delivered: ['v1'], variables_refusal: null, renewals: 0 });
    expect(JSON.stringify(recs)).not.toContain('one'); // the value of v1
  });
});

describe('D5: undeclared runtime use under permissive', () => {
  async function readAndReport(scoping: 'permissive' | 'enforce' | 'off') {
    h = await createHarness({ scoping, liveness: 'observe' });
    await setupVaultAndDag(h); // vault v1, v2; DAG declares v1
    const a = await startAttempt(h);
    await h.agent(a.token).getVariables({});
    const req = create(ReportStateRequestSchema, {
      state: ReportedState.SUCCESS,
      variablesRead: ['v1', 'v2', 'not_in_vault', 'bad name!'],
      connectionsRead: [],
    });
    await h.agent(a.token).reportState(req);
    await h.agent(a.token).reportState(req); // a retried report
    return a;
  }

  it('permissive: one audit event per undeclared name actually delivered (never a value); doctor/API summary per DAG', async () => {
    const a = await readAndReport('permissive');
    const audit = await h.store.listAudit(
      'default',
      { action: 'secret.undeclared_use' },
      { limit: 10, offset: 0 },
    );
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({
      resource_type: 'dag',
      resource_id: 'cred',
      payload: {
        kind: 'variables',
        name: 'v2',
        task_id: 't',
        try_number: 1,
        run_id: a.identity.run_id,
      },
    });
    expect(JSON.stringify(audit)).not.toContain('two'); // v2's value
    expect(await h.store.summarizeUndeclaredUse('default')).toEqual([
      {
        dag_id: 'cred',
        variables: ['v2'],
        connections: [],
        attempts: 1,
        last_seen: h.clock.now(),
      },
    ]);
  });

  it.each(['enforce', 'off'] as const)('%s: nothing is recorded', async (mode) => {
    await readAndReport(mode);
    expect(
      await h.store.listAudit(
        'default',
        { action: 'secret.undeclared_use' },
        { limit: 10, offset: 0 },
      ),
    ).toEqual([]);
    expect(await h.store.summarizeUndeclaredUse('default')).toEqual([]);
  });
});
