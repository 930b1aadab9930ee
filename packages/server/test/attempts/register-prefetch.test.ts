import { createHash } from 'node:crypto';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { codeOf, wire } from './support.js';
import { parseConnectionUri, type SecretLivenessMode } from '@leoflow/core';
import {
  RegisterRequestSchema,
  ReportedState,
  ReportStateRequestSchema,
  type RegisterResponse,
} from '@leoflow/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createHarness,
  spec,
  task,
  type Harness,
  type RecordedLaunch,
} from '../support/harness.js';

/**
 * Register's prefetch (RegisterRequest.prefetch): the declared secrets, the upstreams' return
 * values and the spec come in Register's answer. It must give a live attempt exactly what its
 * own calls would, and an attempt that moved on nothing at all — not even under observe, where
 * its own GetVariables would still deliver (with an audit event).
 */
let h: Harness;
afterEach(async () => {
  await h?.close();
});

type RegisterInit = MessageInitShape<typeof RegisterRequestSchema>;
const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);
const PREFETCH: RegisterInit = {
  agentVersion: 't',
  hostname: 'h',
  pid: 1,
  prefetch: true,
  wantSpec: true,
};

/** `up` (retries 1) → `down` (depends on up, declares v1 and c1); vault also holds v2, c2. */
async function setup(liveness: SecretLivenessMode, rpc: 'memory' | 'http2' = 'memory') {
  h = await createHarness({ scoping: 'enforce', liveness, rpc });
  const now = h.clock.now();
  await h.vault.setVariable('default', 'v1', 'canary-var-7f3a', { secret: true }, now);
  await h.vault.setVariable('default', 'v2', 'undeclared-var', { secret: true }, now);
  await h.vault.setConnection(
    'default',
    'c1',
    parseConnectionUri('postgres://u:canary-pw-91c2@db/x'),
    '',
    now,
  );
  await h.vault.setConnection('default', 'c2', parseConnectionUri('mysql://u:p@db/y'), '', now);
  const s = spec({
    dag_id: 'pre',
    variables: ['v1'],
    connections: ['c1'],
    tasks: [
      task('up', { retries: 1, retry_delay_seconds: 0 }),
      task('down', { depends_on: ['up'] }),
    ],
  });
  await h.store.putDagVersion(
    'default',
    s,
    createHash('sha256').update(JSON.stringify(s)).digest('hex'),
    now,
  );
  await h.runs.trigger('default', 'pre', {});
  await h.scheduler.tick();
  const up = h.executor.take().find((l) => l.identity.task_id === 'up')!;
  return up;
}

async function report(token: string, state: ReportedState) {
  await h.agent(token).reportState(
    create(ReportStateRequestSchema, {
      state,
      exitCode: state === ReportedState.SUCCESS ? 0 : 1,
    }),
  );
}

/** up registers, returns `hello`, succeeds; down is dispatched (not yet registered). */
async function downDispatched(liveness: SecretLivenessMode, rpc: 'memory' | 'http2' = 'memory') {
  const up = await setup(liveness, rpc);
  await h.agent(up.token).register({ agentVersion: 't', hostname: 'h', pid: 1 });
  await h.agent(up.token).pushXCom({ key: 'return_value', value: enc('hello') });
  await report(up.token, ReportedState.SUCCESS);
  await h.scheduler.tick();
  const down = h.executor.take().find((l) => l.identity.task_id === 'down');
  if (!down) throw new Error('down was not dispatched');
  return { up, down };
}

function register(launch: RecordedLaunch, req: RegisterInit): Promise<RegisterResponse> {
  return h
    .agent(launch.token)
    .register({ ...req, sessionKey: `s-${launch.identity.task_instance_id}` });
}

describe('Register prefetch: a live attempt gets what its own calls would give it', () => {
  it.each(['memory', 'http2'] as const)(
    'declared variables and connections only, upstream XComs and the spec, in one answer (%s)',
    async (rpc) => {
      const { down } = await downDispatched('enforce', rpc);
      const reg = await register(down, PREFETCH);
      expect(reg.shouldTerminate).toBe(false);
      const p = reg.prefetch!;
      expect(p.variables?.variables).toEqual({ v1: 'canary-var-7f3a' });
      expect(Object.keys(p.connections?.connectionUris ?? {})).toEqual(['c1']);
      expect(p.connections?.connectionUris['c1']).toContain('canary-pw-91c2');
      expect([p.variablesRefused, p.connectionsRefused]).toEqual(['', '']);
      expect(p.xcoms?.upstreams.map((u) => [u.upstreamTaskId, u.xcom?.found])).toEqual([
        ['up', true],
      ]);
      expect(dec(p.xcoms!.upstreams[0]!.xcom!.value)).toBe('hello');
      // the same answers as the separate calls, byte for byte
      const agent = h.agent(down.token);
      expect(p.variables?.variables).toEqual((await agent.getVariables({})).variables);
      expect(p.connections?.connectionUris).toEqual(
        (await agent.getConnections({})).connectionUris,
      );
      expect(p.spec?.spec).toEqual((await agent.getTaskSpec({})).spec);
      expect(p.spec?.spec?.taskId).toBe('down');
      // the write landed and the per-try record notes the names delivered (never a value)
      expect((await h.store.getTaskInstanceById(down.identity.task_instance_id))?.state).toBe(
        'running',
      );
      const [rec] = await h.store.listAttemptRecords(down.identity.dag_run_id, 'down');
      expect(rec).toMatchObject({ variables_delivered: ['v1'], connections_delivered: ['c1'] });
      expect(JSON.stringify(rec)).not.toMatch(/canary/);
    },
  );

  it('an upstream without a return value is answered found=false; want_spec=false leaves the spec out', async () => {
    const up = await setup('enforce');
    await h.agent(up.token).register({ agentVersion: 't', hostname: 'h', pid: 1 });
    await report(up.token, ReportedState.SUCCESS);
    await h.scheduler.tick();
    const down = h.executor.take().find((l) => l.identity.task_id === 'down')!;
    const reg = await register(down, { ...PREFETCH, wantSpec: false });
    expect(reg.prefetch?.spec).toBeUndefined();
    expect(reg.prefetch?.xcoms?.upstreams.map((u) => [u.upstreamTaskId, u.xcom?.found])).toEqual([
      ['up', false],
    ]);
    expect(reg.prefetch?.variables?.variables).toEqual({ v1: 'canary-var-7f3a' });
  });

  it('an agent that does not ask (an older agent) gets the plain answer', async () => {
    const { down } = await downDispatched('enforce');
    const reg = await register(down, { agentVersion: 't', hostname: 'h', pid: 1 });
    expect(reg.shouldTerminate).toBe(false);
    expect(reg.prefetch).toBeUndefined();
  });
});

describe('Register prefetch: an attempt that moved on gets nothing', () => {
  it.each(['observe', 'enforce'] as const)(
    'a superseded try (%s): should_terminate and no prefetch, though its own GetVariables under observe would deliver',
    async (mode) => {
      const first = await setup(mode);
      await h.agent(first.token).register({ agentVersion: 't', hostname: 'h', pid: 1 });
      await report(first.token, ReportedState.FAILED);
      await h.scheduler.tick();
      const second = h.executor.take().find((l) => l.identity.task_id === 'up')!;
      expect(second.identity.try_number).toBe(2);
      expect((await register(second, PREFETCH)).prefetch?.variables?.variables).toEqual({
        v1: 'canary-var-7f3a',
      });

      const stale = await register(first, PREFETCH);
      expect(stale.shouldTerminate).toBe(true);
      expect(stale.prefetch).toBeUndefined();
      expect(wire(stale)).not.toMatch(/canary|hello/);
    },
  );

  it('a finished attempt registering again (its token replayed): should_terminate, nothing delivered', async () => {
    const { up } = await downDispatched('enforce');
    const again = await register(up, PREFETCH);
    expect(again.shouldTerminate).toBe(true);
    expect(again.prefetch).toBeUndefined();
    expect(wire(again)).not.toMatch(/canary|hello/);
  });

  it('a revoked credential under enforce: the write lands, both secret parts are refused once (one audit event each), the XComs still come', async () => {
    const { down } = await downDispatched('enforce');
    await h.store.revokeAttemptCredential(down.identity.task_instance_id, 1, h.clock.now());
    h.verifier.evictAttempt(down.identity.task_instance_id, 1);
    const reg = await register(down, PREFETCH);
    expect(reg.shouldTerminate).toBe(false);
    const p = reg.prefetch!;
    expect(p.variables).toBeUndefined();
    expect(p.connections).toBeUndefined();
    expect(p.variablesRefused).not.toBe('');
    expect(p.connectionsRefused).not.toBe('');
    expect(wire(reg)).not.toMatch(/canary/);
    // FetchXCom is dependency-authorised, not gated: the same as its own call
    expect(p.xcoms?.upstreams[0]?.xcom?.found).toBe(true);
    const [rec] = await h.store.listAttemptRecords(down.identity.dag_run_id, 'down');
    expect(rec).toMatchObject({
      variables_delivered: null,
      variables_refusal: 'revoked',
      connections_refusal: 'revoked',
    });
    const audit = await h.store.listAudit(
      'default',
      { action: 'secret.revoked_denied' },
      { limit: 10, offset: 0 },
    );
    expect(audit.map((a) => a.payload.kind).sort()).toEqual(['connections', 'variables']);
  });
});

describe('Register prefetch: an inconclusive read is left to the agent’s own calls', () => {
  it('an unreadable DAG version under enforce: no secret, XCom or spec part; the own calls answer Unavailable', async () => {
    const { down } = await downDispatched('enforce');
    const real = h.store.getDagVersion.bind(h.store);
    h.store.getDagVersion = () => Promise.reject(new Error('disk I/O error'));
    await h.store.setRunVersion(down.identity.dag_run_id, 99);
    const reg = await register(down, PREFETCH);
    expect(reg.shouldTerminate).toBe(false);
    const p = reg.prefetch!;
    expect([p.variables, p.connections, p.xcoms, p.spec]).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
    expect([p.variablesRefused, p.connectionsRefused]).toEqual(['', '']);
    expect(await codeOf(h.agent(down.token).getVariables({}))).toBe('Unavailable');
    h.store.getDagVersion = real;
    await h.store.setRunVersion(down.identity.dag_run_id, 1);
    expect((await h.agent(down.token).getVariables({})).variables).toEqual({
      v1: 'canary-var-7f3a',
    });
  });
});
