import { create, toBinary } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import {
  RegisterResponseSchema,
  ReportedState,
  ReportStateRequestSchema,
  type RegisterResponse,
} from '@leoflow/protocol';
import {
  HARNESS_SESSION_KEY,
  spec,
  task,
  type Harness,
  type RecordedLaunch,
} from '../support/harness.js';
import { createHash } from 'node:crypto';
import { expect } from 'vitest';

/**
 * 'delivered': the reply carries v1; 'empty': a successful reply without it (e.g. enforce with
 * nothing declared) — NOT a refusal; 'denied': PermissionDenied; 'unauthenticated'.
 */
export type Access = 'delivered' | 'empty' | 'denied' | 'unauthenticated';

/** GetVariables with a token: what the credential can do right now. */
export async function access(h: Harness, token: string): Promise<Access> {
  try {
    const res = await h.agent(token).getVariables({});
    return res.variables.v1 === 'one' ? 'delivered' : 'empty';
  } catch (err) {
    const e = ConnectError.from(err);
    if (e.code === Code.PermissionDenied) return 'denied';
    if (e.code === Code.Unauthenticated) return 'unauthenticated';
    throw err;
  }
}

/** The Connect code name a call ends with ('ok' when it succeeds). */
export async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    return Code[ConnectError.from(err).code];
  }
}

/**
 * Runs `supersede` once, right after the next fence read has returned what it saw: the race
 * between a fenced RPC's check and its write, driven without sleeps.
 */
export function supersedeAfterNextFenceRead(
  h: Harness,
  supersede: () => Promise<void>,
): { ran: () => boolean } {
  const read = h.store.getAttemptFence.bind(h.store);
  let armed = true;
  let ran = false;
  h.store.getAttemptFence = async (id) => {
    const seen = await read(id);
    if (armed) {
      armed = false;
      await supersede();
      ran = true;
    }
    return seen;
  };
  return { ran: () => ran };
}

export async function heartbeat(h: Harness, token: string, session?: string) {
  try {
    return await h.agent(token, session).heartbeat({});
  } catch (err) {
    const e = ConnectError.from(err);
    if (e.code === Code.Unauthenticated) return undefined;
    throw err;
  }
}

export async function report(
  h: Harness,
  token: string,
  state: 'success' | 'failed',
  session?: string,
) {
  return h.agent(token, session).reportState(
    create(ReportStateRequestSchema, {
      state: state === 'success' ? ReportedState.SUCCESS : ReportedState.FAILED,
      exitCode: state === 'success' ? 0 : 1,
    }),
  );
}

export async function setupVaultAndDag(
  h: Harness,
  opts: { retries?: number; dagId?: string } = {},
) {
  const now = h.clock.now();
  await h.vault.setVariable('default', 'v1', 'one', { secret: true }, now);
  await h.vault.setVariable('default', 'v2', 'two', { secret: true }, now);
  const s = spec({
    dag_id: opts.dagId ?? 'cred',
    variables: ['v1'],
    tasks: [task('t', { retries: opts.retries ?? 0, retry_delay_seconds: 0 })],
  });
  await h.store.putDagVersion(
    'default',
    s,
    createHash('sha256').update(JSON.stringify(s)).digest('hex'),
    now,
  );
  return s;
}

/**
 * Trigger, dispatch and register one attempt; returns its launch (with the minted token) and the
 * session key its "agent" bound at Register.
 */
export async function startAttempt(
  h: Harness,
  dagId = 'cred',
  runId?: string,
): Promise<RecordedLaunch & { session: string }> {
  if (runId === undefined) await h.runs.trigger('default', dagId, {});
  await h.scheduler.tick();
  const launch = h.executor.take()[0];
  if (!launch) throw new Error('nothing was dispatched');
  const session = `session-${launch.identity.task_instance_id}-${launch.identity.try_number}`;
  const reg = await h
    .agent(launch.token)
    .register({ agentVersion: 't', hostname: 'h', pid: 1, sessionKey: session });
  if (reg.shouldTerminate) throw new Error(`register was told to stop: ${reg.terminateReason}`);
  return { ...launch, session };
}

/** Every byte a Register answer puts on the wire (or a pipe), as text: protobuf strings and bytes are verbatim. */
export function wire(res: RegisterResponse): string {
  return Buffer.from(toBinary(RegisterResponseSchema, res)).toString('latin1');
}

/**
 * Binds the harness agent's session key to a still-queued attempt, as its Register would have,
 * without moving it to running. Only for tests of the write fences against a superseded dispatch
 * generation: in production a requeue moves only an attempt whose agent never registered, so such
 * an agent's calls are refused by the session rule (LF_CREDENTIAL_UNBOUND) before any fence; the
 * fences stay as defence in depth, and this lets their tests reach them.
 */
export async function bindSessionOfQueued(h: Harness, token: string): Promise<void> {
  const claims = await h.verifier.verify(token, h.clock.now());
  expect(await h.sessions.bind(claims, HARNESS_SESSION_KEY)).toBe('bound');
}
