import { createHash, randomBytes } from 'node:crypto';
import { parseConnectionUri, type SecretLivenessMode } from '@leoflow/core';
import { ReportedState } from '@leoflow/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createHarness,
  spec,
  task,
  type Harness,
  type RecordedLaunch,
} from '../support/harness.js';
import { codeOf, wire } from './support.js';

/**
 * The subprocess executor registers an attempt for the standby agent it hands it to
 * (AttemptLaunch.handOff, built in boot/plane-assembly.ts): Register's work without Register's round
 * trip. It must be exactly Register: a live attempt gets its declared secrets and its session key
 * bound; an attempt that moved on before the hand-off gets should_terminate and nothing else, in
 * either liveness mode; a token this control plane did not mint registers nothing.
 */
let h: Harness;
afterEach(async () => {
  await h?.close();
});

const agentAt = (pid: number) => ({
  hostname: 'standby-host',
  pid,
  sessionKey: randomBytes(32).toString('base64url'),
});

/** `up` (retries 1, declares v1 and c1) in a tenant vault that also holds an undeclared v2. */
async function dispatched(liveness: SecretLivenessMode): Promise<RecordedLaunch> {
  h = await createHarness({ scoping: 'enforce', liveness });
  const now = h.clock.now();
  await h.vault.setVariable('default', 'v1', 'canary-handoff-4d1e', { secret: true }, now);
  await h.vault.setVariable('default', 'v2', 'undeclared-handoff', { secret: true }, now);
  await h.vault.setConnection(
    'default',
    'c1',
    parseConnectionUri('postgres://u:canary-pw-handoff@db/x'),
    '',
    now,
  );
  const s = spec({
    dag_id: 'handoff',
    variables: ['v1'],
    connections: ['c1'],
    tasks: [task('up', { retries: 1, retry_delay_seconds: 0 })],
  });
  await h.store.putDagVersion(
    'default',
    s,
    createHash('sha256').update(JSON.stringify(s)).digest('hex'),
    now,
  );
  await h.runs.trigger('default', 'handoff', {});
  await h.scheduler.tick();
  const [launch] = h.executor.take();
  if (!launch?.handOff) throw new Error('the launch offers no hand-off registration');
  return launch;
}

describe('hand-off registration: a live attempt', () => {
  it('is registered as its own Register would: the row runs with the agent’s pid, the declared secrets come in the answer', async () => {
    const up = await dispatched('enforce');
    const agent = agentAt(4242);
    const answer = await up.handOff!.register(up.token, agent);
    expect(answer.shouldTerminate).toBe(false);
    expect(answer.sessionId).toBe(up.identity.task_instance_id);
    expect(answer.prefetch?.variables?.variables).toEqual({ v1: 'canary-handoff-4d1e' });
    expect(Object.keys(answer.prefetch?.connections?.connectionUris ?? {})).toEqual(['c1']);
    // the spec travels on the pipe on its own; the hand-off does not repeat it
    expect(answer.prefetch?.spec).toBeUndefined();
    expect(wire(answer)).not.toContain('undeclared-handoff');
    const row = await h.store.getTaskInstanceById(up.identity.task_instance_id);
    expect(row).toMatchObject({ state: 'running', pid: 4242, hostname: 'standby-host' });
    const [rec] = await h.store.listAttemptRecords(up.identity.dag_run_id, 'up');
    expect(rec).toMatchObject({ variables_delivered: ['v1'], connections_delivered: ['c1'] });
  });

  it('binds the session key it was given: past exp only that key reports for the attempt, and no second process can register', async () => {
    const up = await dispatched('enforce');
    const agent = agentAt(4242);
    await up.handOff!.register(up.token, agent);
    // the agent that was handed the key goes on with it
    expect(await codeOf(h.agent(up.token, agent.sessionKey).heartbeat({}))).toBe('ok');
    // another process holding a copy of the token cannot register in its place
    expect(
      await codeOf(
        h.agent(up.token).register({
          agentVersion: 't',
          hostname: 'elsewhere',
          pid: 9,
          sessionKey: 'another-key',
        }),
      ),
    ).toBe('PermissionDenied');
    // issue 34: the second registration proves the token was copied: the attempt fails loudly
    // (it cannot be told which process is the real agent) and its credential is revoked
    const row = await h.store.getTaskInstanceById(up.identity.task_instance_id);
    expect(row?.error_message).toMatch(/^LF_CREDENTIAL_COPIED: two agent processes registered/);
    expect(row?.state).toBe('up_for_retry');
    h.clock.advance(11 * 60_000); // past the token's 10 min exp
    h.verifier.evictAttempt(up.identity.task_instance_id, 1);
    expect(await codeOf(h.agent(up.token, agent.sessionKey).heartbeat({}))).toBe('ok');
    expect(await codeOf(h.agent(up.token, 'another-key').heartbeat({}))).toBe('Unauthenticated');
  });
});

describe('hand-off registration: an attempt that moved on before the hand-off', () => {
  it.each(['observe', 'enforce'] as const)(
    'a superseded try (%s): should_terminate, no prefetch, the live try’s row untouched',
    async (mode) => {
      const first = await dispatched(mode);
      await h.agent(first.token).register({ agentVersion: 't', hostname: 'h', pid: 1 });
      await h.agent(first.token).reportState({ state: ReportedState.FAILED, exitCode: 1 });
      await h.scheduler.tick();
      const second = h.executor.take().find((l) => l.identity.try_number === 2);
      expect(second).toBeDefined();

      const stale = await first.handOff!.register(first.token, agentAt(5151));
      expect(stale.shouldTerminate).toBe(true);
      expect(stale.prefetch).toBeUndefined();
      expect(wire(stale)).not.toMatch(/canary/);
      const row = await h.store.getTaskInstanceById(first.identity.task_instance_id);
      expect(row).toMatchObject({ try_number: 2, state: 'queued' });
      expect(row?.pid).not.toBe(5151);
    },
  );

  it('a finished attempt (its token handed over again): should_terminate, nothing delivered', async () => {
    const up = await dispatched('enforce');
    const agent = agentAt(4242);
    await up.handOff!.register(up.token, agent);
    await h
      .agent(up.token, agent.sessionKey)
      .reportState({ state: ReportedState.SUCCESS, exitCode: 0 });
    const again = await up.handOff!.register(up.token, agentAt(4343));
    expect(again.shouldTerminate).toBe(true);
    expect(wire(again)).not.toMatch(/canary/);
    expect((await h.store.getTaskInstanceById(up.identity.task_instance_id))?.state).toBe(
      'success',
    );
  });

  it('a token this control plane did not mint registers nothing (the executor then leaves Register to the agent, which is refused)', async () => {
    const up = await dispatched('enforce');
    const [header, payload] = up.token.split('.');
    const forged = `${header}.${payload}.${Buffer.alloc(64, 1).toString('base64url')}`;
    await expect(up.handOff!.register(forged, agentAt(4242))).rejects.toThrow();
    await expect(up.handOff!.register('not-a-token', agentAt(4242))).rejects.toThrow();
    expect((await h.store.getTaskInstanceById(up.identity.task_instance_id))?.state).toBe('queued');
    const [rec] = await h.store.listAttemptRecords(up.identity.dag_run_id, 'up');
    expect(rec?.variables_delivered ?? null).toBeNull();
  });
});
