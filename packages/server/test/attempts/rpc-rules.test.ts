import { createHash } from 'node:crypto';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { parseConnectionUri, type SecretLivenessMode } from '@leoflow/core';
import {
  LogStream,
  PushLogsRequestSchema,
  ReportedState,
  ReportStateRequestSchema,
} from '@leoflow/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_XCOM_BYTES } from '../../src/rpc/agent-service/logs-xcom.js';
import { createHarness, spec, task, type Harness } from '../support/harness.js';
import { startAttempt } from './support.js';

/**
 * docs/credentials.md "Which RPC checks what": for each of the nine agent RPCs, what a live
 * attempt gets (availability) and what an attempt that moved on gets (security / fence), in
 * both liveness modes where the mode could matter.
 *
 *   gated (observe|enforce): GetVariables, GetConnections
 *   fenced (mode-independent): PushXCom, ReportState, PushLogs, Register's queued→running write
 *   free: Register, GetTaskSpec, Heartbeat (should_terminate), FetchXCom (dependency-authorised)
 */
let h: Harness;
afterEach(async () => {
  await h?.close();
});

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    return Code[ConnectError.from(err).code];
  }
}

/** `up` (retries 1, xcom) → `down`; try 1 of `up` superseded by its live try 2. */
async function superseded(liveness: SecretLivenessMode) {
  h = await createHarness({ scoping: 'enforce', liveness });
  const now = h.clock.now();
  await h.vault.setVariable('default', 'v1', 'one', { secret: true }, now);
  await h.vault.setConnection('default', 'c1', parseConnectionUri('postgres://u:p@db/x'), '', now);
  const s = spec({
    dag_id: 'rules',
    variables: ['v1'],
    connections: ['c1'],
    tasks: [
      task('up', { retries: 1, retry_delay_seconds: 0 }),
      task('down', {
        depends_on: ['up'],
        env: { LEOFLOW_AGENT_URL: 'x', leoflow_token: 'y', OK: '1' },
      }),
      task('other'),
    ],
  });
  await h.store.putDagVersion(
    'default',
    s,
    createHash('sha256').update(JSON.stringify(s)).digest('hex'),
    now,
  );
  await h.runs.trigger('default', 'rules', {});
  await h.scheduler.tick();
  const launches = h.executor.take();
  const upLaunch = launches.find((l) => l.identity.task_id === 'up')!;
  const otherLaunch = launches.find((l) => l.identity.task_id === 'other')!;
  await h.agent(upLaunch.token).register({ agentVersion: 't', hostname: 'h', pid: 1 });
  const first = upLaunch;
  // try 1 fails; try 2 becomes the live try
  await h
    .agent(first.token)
    .reportState(create(ReportStateRequestSchema, { state: ReportedState.FAILED, exitCode: 1 }));
  const second = await startAttempt(h, 'rules', 'existing');
  expect(second.identity.task_id).toBe('up');
  expect(second.identity.try_number).toBe(2);
  return { first, second, other: otherLaunch };
}

async function tiState(id: string) {
  const ti = await h.store.getTaskInstanceById(id);
  return { state: ti?.state, try: ti?.try_number };
}

describe('the liveness gate is on GetVariables and GetConnections only', () => {
  it.each(['observe', 'enforce'] as const)(
    'GetVariables/GetConnections (%s): a live try is delivered; a superseded try is delivered+audited under observe, refused+audited under enforce',
    async (mode) => {
      const { first, second } = await superseded(mode);
      // availability: the live try
      expect((await h.agent(second.token).getVariables({})).variables).toEqual({ v1: 'one' });
      expect(Object.keys((await h.agent(second.token).getConnections({})).connectionUris)).toEqual([
        'c1',
      ]);
      // the superseded try
      if (mode === 'observe') {
        expect((await h.agent(first.token).getVariables({})).variables).toEqual({ v1: 'one' });
        expect(Object.keys((await h.agent(first.token).getConnections({})).connectionUris)).toEqual(
          ['c1'],
        );
      } else {
        for (const call of [
          () => h.agent(first.token).getVariables({}),
          () => h.agent(first.token).getConnections({}),
        ]) {
          const err = await call().then(
            () => undefined,
            (e: unknown) => ConnectError.from(e),
          );
          expect(err?.code).toBe(Code.PermissionDenied);
          expect(err?.rawMessage).toBe('task instance is no longer live');
        }
      }
      const action = mode === 'observe' ? 'secret.liveness_would_deny' : 'secret.liveness_denied';
      const audit = await h.store.listAudit('default', { action }, { limit: 10, offset: 0 });
      expect(audit.map((a) => a.payload.kind).sort()).toEqual(['connections', 'variables']);
      for (const a of audit) {
        expect(a.payload).toMatchObject({ task_id: 'up', try_number: 1, mode });
        expect(JSON.stringify(a)).not.toMatch(/"one"|postgres:\/\//);
      }
      // the live try's fetches produced no liveness event
      expect(audit.every((a) => a.actor.endsWith('#1'))).toBe(true);
    },
  );
});

describe('free RPCs answer a stale attempt in both modes (no gate)', () => {
  it.each(['observe', 'enforce'] as const)(
    'Register (%s): live → running; superseded → should_terminate, nothing written, no error',
    async (mode) => {
      const { first, second } = await superseded(mode);
      expect(await tiState(second.identity.task_instance_id)).toEqual({ state: 'running', try: 2 });
      const stale = await h
        .agent(first.token)
        .register({ agentVersion: 't', hostname: 'z', pid: 9 });
      expect(stale.shouldTerminate).toBe(true);
      expect(stale.terminateReason).toMatch(/no longer the live try/);
      const ti = await h.store.getTaskInstanceById(second.identity.task_instance_id);
      expect(ti).toMatchObject({ state: 'running', try_number: 2, hostname: 'h', pid: 1 });
      // a repeated Register of the live try (after a control-plane restart) is fine
      const again = await h
        .agent(second.token)
        .register({ agentVersion: 't', hostname: 'h', pid: 1, sessionKey: second.session });
      expect(again.shouldTerminate).toBe(false);
    },
  );

  it('Register: a second agent process with another session key is refused (the first binding stands)', async () => {
    const { second } = await superseded('observe');
    const other = await codeOf(
      h.agent(second.token).register({ agentVersion: 't', hostname: 'h', pid: 2, sessionKey: 'x' }),
    );
    expect(other).toBe('PermissionDenied');
  });

  it.each(['observe', 'enforce'] as const)(
    'GetTaskSpec (%s): served to the live try and to a superseded try; author LEOFLOW_* env dropped',
    async (mode) => {
      const { first, second } = await superseded(mode);
      expect((await h.agent(second.token).getTaskSpec({})).spec?.tryNumber).toBe(2);
      const stale = await h.agent(first.token).getTaskSpec({});
      expect(stale.spec?.taskId).toBe('up');
      // finish up → down is dispatched; its spec drops LEOFLOW_* author keys in any case
      await h
        .agent(second.token)
        .reportState(create(ReportStateRequestSchema, { state: ReportedState.SUCCESS }));
      const down = await startAttempt(h, 'rules', 'existing');
      const env = (await h.agent(down.token).getTaskSpec({})).spec!.env;
      expect(env).toEqual({ OK: '1' });
    },
  );

  it.each(['observe', 'enforce'] as const)(
    'Heartbeat (%s): live → renewed, no terminate; superseded → should_terminate and no token',
    async (mode) => {
      const { first, second } = await superseded(mode);
      const live = await h.agent(second.token).heartbeat({});
      expect(live.shouldTerminate).toBe(false);
      expect(live.renewedToken).not.toBe('');
      const stale = await h.agent(first.token).heartbeat({});
      expect(stale.shouldTerminate).toBe(true);
      expect(stale.renewedToken).toBe('');
    },
  );

  it.each(['observe', 'enforce'] as const)(
    'FetchXCom (%s): an upstream it depends on is readable live and after it finished; a non-upstream is refused',
    async (mode) => {
      const { second } = await superseded(mode);
      expect(
        (await h.agent(second.token).pushXCom({ key: 'return_value', value: enc('"v"') })).accepted,
      ).toBe(true);
      await h
        .agent(second.token)
        .reportState(create(ReportStateRequestSchema, { state: ReportedState.SUCCESS }));
      const down = await startAttempt(h, 'rules', 'existing');
      const live = await h.agent(down.token).fetchXCom({ upstreamTaskId: 'up' });
      expect(live.found && dec(live.value)).toBe('"v"');
      await h
        .agent(down.token)
        .reportState(create(ReportStateRequestSchema, { state: ReportedState.SUCCESS }));
      // free: the finished attempt still reads its upstream (no liveness gate on XCom)
      const after = await h.agent(down.token).fetchXCom({ upstreamTaskId: 'up' });
      expect(after.found && dec(after.value)).toBe('"v"');
      // refusal: not an upstream
      const err = await h
        .agent(down.token)
        .fetchXCom({ upstreamTaskId: 'other' })
        .then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
      expect(err?.code).toBe(Code.PermissionDenied);
      expect(err?.rawMessage).toBe(
        'task down may not read xcom from other (not an upstream it depends on)',
      );
    },
  );
});

describe('the write fence is mode-independent: a superseded try never lands', () => {
  it.each(['observe', 'enforce'] as const)(
    'PushXCom (%s): the live try lands (≤ 256 KiB); the superseded try is refused and does not overwrite',
    async (mode) => {
      const { first, second } = await superseded(mode);
      const ok = await h.agent(second.token).pushXCom({ key: 'k', value: enc('live') });
      expect(ok.accepted).toBe(true);
      expect(await codeOf(h.agent(first.token).pushXCom({ key: 'k', value: enc('stale') }))).toBe(
        'FailedPrecondition',
      );
      const row = await h.store.getXCom(second.identity.dag_run_id, 'up', 'k');
      expect(dec(row!.value)).toBe('live');
      // the 256 KiB limit, both sides of the boundary
      const atLimit = await h
        .agent(second.token)
        .pushXCom({ key: 'big', value: new Uint8Array(MAX_XCOM_BYTES) });
      expect(atLimit.accepted).toBe(true);
      const over = await h
        .agent(second.token)
        .pushXCom({ key: 'big2', value: new Uint8Array(MAX_XCOM_BYTES + 1) });
      expect(over).toMatchObject({ accepted: false, rejectionReason: 'payload_too_large' });
      expect(await h.store.getXCom(second.identity.dag_run_id, 'up', 'big2')).toBeUndefined();
    },
  );

  it.each(['observe', 'enforce'] as const)(
    'ReportState (%s): the live try applies; the superseded try changes nothing and is told to stop',
    async (mode) => {
      const { first, second } = await superseded(mode);
      const stale = await h
        .agent(first.token)
        .reportState(create(ReportStateRequestSchema, { state: ReportedState.SUCCESS }));
      expect(stale.shouldTerminate).toBe(true);
      expect(await tiState(second.identity.task_instance_id)).toEqual({ state: 'running', try: 2 });
      const live = await h
        .agent(second.token)
        .reportState(create(ReportStateRequestSchema, { state: ReportedState.SUCCESS }));
      expect(live.shouldTerminate).toBe(false);
      expect(await tiState(second.identity.task_instance_id)).toEqual({ state: 'success', try: 2 });
    },
  );

  it.each(['observe', 'enforce'] as const)(
    'PushLogs (%s): the live try and a just-finished try land; a superseded try does not',
    async (mode) => {
      const { first, second } = await superseded(mode);
      const line = (n: number, message: string) =>
        create(PushLogsRequestSchema, {
          lines: [{ lineNumber: BigInt(n), timeMs: 1n, stream: LogStream.STDOUT, message }],
        });
      expect(await codeOf(h.agent(second.token).pushLogs(line(1, 'live')))).toBe('ok');
      expect(await codeOf(h.agent(first.token).pushLogs(line(99, 'stale')))).toBe(
        'FailedPrecondition',
      );
      const run = second.identity.dag_run_id;
      expect((await h.store.readLogs(run, 'up', 1, 0, 100)).map((l) => l.message)).not.toContain(
        'stale',
      );
      await h
        .agent(second.token)
        .reportState(create(ReportStateRequestSchema, { state: ReportedState.SUCCESS }));
      expect(await codeOf(h.agent(second.token).pushLogs(line(2, 'final')))).toBe('ok');
      expect((await h.store.readLogs(run, 'up', 2, 0, 100)).map((l) => l.message)).toEqual([
        'live',
        'final',
      ]);
    },
  );
});
