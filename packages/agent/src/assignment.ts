import { fromBinary } from '@bufbuild/protobuf';
import {
  RegisterResponseSchema,
  TaskSpecSchema,
  type RegisterResponse,
  type TaskSpec,
} from '@leoflow/protocol';
import { TokenReadError } from './token.js';

/** A JWT is a few KiB; anything much larger is a wiring mistake, not a token. */
const MAX_TOKEN_BYTES = 64 * 1024;

/**
 * What arrives on fd 3: a bare token, or the whole assignment as JSON — the token, which attempt
 * (standby agents learn it only here) and, from the subprocess executor, the attempt's spec, so
 * the agent need not call GetTaskSpec. The token still decides which attempt this is: the
 * server checks it at Register, and a spec for an attempt that moved on runs nothing because
 * Register then answers should_terminate.
 */
export interface Assignment {
  token: string;
  taskInstanceId?: string;
  workdir?: string;
  spec?: TaskSpec;
  /**
   * The subprocess executor registers the attempt for this (standby) agent and sends what
   * Register answered as a second message (parseHandOffRegistration), binding this session key
   * (docs/agent.md, "Standby agents"). Should that message not come, the agent registers itself
   * with the same key.
   */
  handOff?: { sessionKey: string };
}

export function parseAssignment(payload: string): Assignment {
  if (!payload.startsWith('{')) return { token: checkedToken(payload) };
  let v: unknown;
  try {
    v = JSON.parse(payload);
  } catch {
    throw new TokenReadError('the assignment on the token pipe is not valid JSON');
  }
  const o = v as Record<string, unknown>;
  if (typeof o.token !== 'string' || o.token === '') {
    throw new TokenReadError('the assignment on the token pipe carries no token');
  }
  const str = (x: unknown) => (typeof x === 'string' && x !== '' ? x : undefined);
  const taskInstanceId = str(o.task_instance_id);
  const workdir = str(o.workdir);
  const spec = o.spec === undefined ? undefined : decodeSpec(o.spec, taskInstanceId);
  const handOff = decodeHandOff(o.registration, o.session_key);
  return {
    token: checkedToken(o.token),
    ...(taskInstanceId !== undefined ? { taskInstanceId } : {}),
    ...(workdir !== undefined ? { workdir } : {}),
    ...(spec !== undefined ? { spec } : {}),
    ...(handOff !== undefined ? { handOff } : {}),
  };
}

function checkedToken(token: string): string {
  if (Buffer.byteLength(token) > MAX_TOKEN_BYTES) {
    throw new TokenReadError(`the token on the token pipe is larger than ${MAX_TOKEN_BYTES} bytes`);
  }
  return token;
}

/** The TaskSpec message's protobuf binary form, base64: exactly what GetTaskSpec carries. */
function decodeSpec(raw: unknown, taskInstanceId: string | undefined): TaskSpec {
  if (typeof raw !== 'string' || raw === '') {
    throw new TokenReadError('the assignment on the token pipe carries an empty spec');
  }
  let spec: TaskSpec;
  try {
    spec = fromBinary(TaskSpecSchema, Buffer.from(raw, 'base64'));
  } catch {
    throw new TokenReadError('the spec on the token pipe is not a TaskSpec message');
  }
  // One executor write carries both: a spec for another task instance is a wiring mistake.
  if (spec.taskInstanceId === '' || spec.taskInstanceId !== taskInstanceId) {
    throw new TokenReadError(
      'the spec on the token pipe is not for the task instance the assignment names',
    );
  }
  return spec;
}

/** A session key is 32 random bytes, base64url: what TokenHolder draws for itself. */
const SESSION_KEY = /^[A-Za-z0-9_-]{43}$/;

/** `registration: "follows"` and the session key it binds: both or neither. */
function decodeHandOff(registration: unknown, sessionKey: unknown): Assignment['handOff'] {
  if (registration === undefined && sessionKey === undefined) return undefined;
  if (registration !== 'follows' || typeof sessionKey !== 'string') {
    throw new TokenReadError(
      'the assignment on the token pipe announces a registration without its session key, or the reverse',
    );
  }
  if (!SESSION_KEY.test(sessionKey)) {
    throw new TokenReadError('the session key on the token pipe is not 32 bytes of base64url');
  }
  return { sessionKey };
}

/**
 * The hand-off's second message: `{"registered": "<RegisterResponse, protobuf binary, base64>"}`,
 * or `{"register": "self"}` when the executor could not register (the agent then calls Register).
 * Undefined means "register yourself".
 */
export function parseHandOffRegistration(
  message: string,
  taskInstanceId: string | undefined,
): RegisterResponse | undefined {
  let v: unknown;
  try {
    v = JSON.parse(message);
  } catch {
    throw new TokenReadError('the registration on the token pipe is not valid JSON');
  }
  const o = (typeof v === 'object' && v !== null ? v : {}) as Record<string, unknown>;
  if (o.register === 'self' && o.registered === undefined) return undefined;
  if (typeof o.registered !== 'string' || o.registered === '') {
    throw new TokenReadError('the second message on the token pipe carries no registration');
  }
  let answer: RegisterResponse;
  try {
    answer = fromBinary(RegisterResponseSchema, Buffer.from(o.registered, 'base64'));
  } catch {
    throw new TokenReadError('the registration on the token pipe is not a RegisterResponse');
  }
  // A registration answered for another attempt is a wiring mistake, as a foreign spec is.
  if (!answer.shouldTerminate && answer.sessionId !== taskInstanceId) {
    throw new TokenReadError(
      'the registration on the token pipe is not for the task instance the assignment names',
    );
  }
  return answer;
}
