import { SESSION_HEADER } from '@leoflow/protocol';
import {
  Code,
  ConnectError,
  createContextKey,
  type HandlerContext,
  type Interceptor,
} from '@connectrpc/connect';
import { WARM_WORKER_NOT_LEADER_CODE, type AgentService } from '@leoflow/protocol';
import type { Clock } from '@leoflow/core';
import {
  AgentTokenError,
  type AgentTokenClaims,
  type AgentTokenVerification,
} from '../auth/agent-token.js';
import {
  unboundMessage,
  type SessionBindings,
  type SessionVerdict,
} from '../attempts/session-binding.js';
import {
  WorkerTokenError,
  type WorkerTokenClaims,
  type WorkerTokenVerification,
} from '../auth/worker-token.js';

/**
 * Agent authentication, in one place. The pre-body gate (startAgentRpcServer) calls `admit` with
 * the Authorization header before a byte of the body is read; the interceptor then turns what the
 * gate verified into a typed principal on the call context, applying AGENT_RPC_ACCESS. Handlers
 * read the principal (`attemptPrincipal(ctx)`), never a header.
 */

/** One attempt's agent, authenticated by its attempt credential. */
export interface AttemptPrincipal {
  readonly kind: 'attempt';
  readonly claims: AgentTokenClaims;
  /**
   * Past its exp: admitted only because the RPC accepts it (AGENT_RPC_ACCESS) and the request
   * carried the session key the attempt's agent bound at Register. Never renewed.
   */
  readonly expired: boolean;
  /**
   * The agent bound at Register masks delivered secrets in its output (issue 34); absent or
   * false: the control plane masks its log lines and XCom values on write.
   */
  readonly agentMasksSecrets?: boolean;
}

/**
 * A runner, authenticated by the door session it calls in (no bearer: the session is the
 * credential; the door checked its token and the cell its per-connection secret and placement).
 * It may only wait for assignments; every attempt RPC inside the session carries that
 * attempt's own token.
 */
export interface RunnerPrincipal {
  readonly kind: 'runner';
  readonly runner_id: string;
  readonly tenant_id: string;
}

/**
 * A warm-pool pod between attempts, authenticated by its worker-scoped bootstrap token. It may
 * Register and wait for assignments, nothing else: it fetches no secret and reports for no
 * attempt (each attempt it runs calls with that attempt's own token).
 */
export interface WorkerPrincipal {
  readonly kind: 'worker';
  readonly claims: WorkerTokenClaims;
  /** the bearer itself, so the stream can tell when the token it renews runs out */
  readonly token: string;
}

/** The runner a request arrived through (its door session), as the agent port's gate sees it. */
export interface RunnerSessionIdentity {
  runner_id: string;
  tenant_id: string;
}

/**
 * Who is calling the agent port: an attempt (its bearer) or a runner (its door session). A
 * warm-pool `worker` (bootstrap token) joins this union as its own kind with its own column in
 * AGENT_RPC_ACCESS; a handler that serves only attempts keeps calling attemptPrincipal().
 */
export type AgentPrincipal = AttemptPrincipal | RunnerPrincipal | WorkerPrincipal;
export type AgentPrincipalKind = AgentPrincipal['kind'];

export const AGENT_PRINCIPAL = createContextKey<AgentPrincipal | undefined>(undefined, {
  description: 'leoflow agent principal',
});

/** The AgentService RPCs, by their generated local names (register, getTaskSpec, …). */
export type AgentRpcName = keyof (typeof AgentService)['method'];

/**
 * What an attempt credential needs for one RPC:
 * - `unexpired`: a credential before its exp;
 * - `unexpired-or-session-bound`: also a credential past its exp when everything else verifies
 *   AND the request carries the session key bound at Register.
 */
export type AttemptAccess = 'unexpired' | 'unexpired-or-session-bound';

/** What a runner needs: to call from inside a door session the cell accepted. */
export type RunnerAccess = 'door-session';

/** What a warm-pool worker needs: its unexpired worker-scoped token. */
export type WorkerAccess = 'worker-token';
/**
 * The exchange's caller: no Leoflow bearer at all, its platform credential in the request body
 * (the exchange itself verifies it with one TokenReview).
 */
export type ExchangeAccess = 'body-credential';

/** Per RPC, which principal kinds it serves and how; a kind without an entry is refused. */
export interface AgentRpcAccessRow {
  readonly attempt?: AttemptAccess;
  readonly runner?: RunnerAccess;
  readonly worker?: WorkerAccess;
  readonly exchange?: ExchangeAccess;
}

/** The refusal every RPC outside a worker's column answers a worker token with. */
export const WORKER_TOKEN_REFUSAL =
  'a worker token authorizes only Register and AwaitAssignment, not secrets or task RPCs; ' +
  'each attempt calls with its own token from the assignment';

export const WORKER_NOT_SERVING_CODE = 'LF_WARM_WORKER_NOT_SERVING';
/** The sanitised refusal of a worker token whose pod is no longer a serving pool member. */
export const WORKER_NOT_SERVING = `${WORKER_NOT_SERVING_CODE}: this warm-pool pod is not serving (recycled or unknown); the pool replaces it`;

/**
 * The refusal of AwaitAssignment with a worker token on a replica that does not hold the
 * scheduling lease: only the leader's warm routing hands out assignments (its broker is in its
 * memory), so a worker waiting elsewhere would wait for nothing. Unavailable, with the code in
 * the metadata: the worker reconnects on a new connection, which a Service may route to the
 * leader.
 */
export const WORKER_NOT_LEADER = `${WARM_WORKER_NOT_LEADER_CODE}: this control-plane replica does not lead, so no assignment reaches a warm worker here; reconnect (a new connection may reach the leader)`;

/**
 * THE declaration of which RPC accepts which principal (docs/credentials.md, "Which RPC checks
 * what" and "An expired credential", mirror it; a test keeps the doc true). Past exp only the
 * calls that carry no secret and write only the attempt's own data are open, and only with the
 * session key. Every RPC of the service must have a row (the type requires it).
 */
export const AGENT_RPC_ACCESS: Readonly<Record<AgentRpcName, AgentRpcAccessRow>> = {
  register: { attempt: 'unexpired', worker: 'worker-token' },
  getTaskSpec: { attempt: 'unexpired' },
  heartbeat: { attempt: 'unexpired-or-session-bound' },
  reportState: { attempt: 'unexpired-or-session-bound' },
  pushXCom: { attempt: 'unexpired-or-session-bound' },
  fetchXCom: { attempt: 'unexpired' },
  pushLogs: { attempt: 'unexpired-or-session-bound' },
  getVariables: { attempt: 'unexpired' },
  getConnections: { attempt: 'unexpired' },
  // The one RPC without a Leoflow bearer: the exchange carries its credential in the body (a
  // bearer on it is refused) and answers Unimplemented where exchange is not wired.
  exchangeToken: { exchange: 'body-credential' },
  // A runner waits for attempts in its door session, a warm-pool pod with its worker token.
  // AckAssignment is made with the assigned attempt's own token.
  awaitAssignment: { runner: 'door-session', worker: 'worker-token' },
  ackAssignment: { attempt: 'unexpired' },
};

/**
 * What an attempt RPC asks of the agent's session key (docs/credentials.md, "Which RPC checks
 * what", column "session key"; a test keeps the doc true):
 * - `binds`: Register binds the key it carries (its body, else the header) to the attempt;
 * - `before-register`: a call an agent makes before it registers (a runner's AckAssignment);
 * - `required`: the key bound at Register, on every call, whatever exp says — a token presented
 *   without it, with another, or before any Register is refused (LF_CREDENTIAL_UNBOUND) and
 *   audited (credential.unbound_use);
 * - `none`: no attempt token at all (the exchange, a runner's or worker's wait).
 */
export type AttemptSessionRule = 'binds' | 'before-register' | 'required' | 'none';

export const AGENT_RPC_SESSION: Readonly<Record<AgentRpcName, AttemptSessionRule>> = {
  register: 'binds',
  ackAssignment: 'before-register',
  getTaskSpec: 'required',
  heartbeat: 'required',
  reportState: 'required',
  pushXCom: 'required',
  fetchXCom: 'required',
  pushLogs: 'required',
  getVariables: 'required',
  getConnections: 'required',
  exchangeToken: 'none',
  awaitAssignment: 'none',
};

/**
 * What verifying the bearer found. The gate hands it to the interceptor (ADMITTED_BEARER), so a
 * request's signature is checked once. `expired`: the signature is genuine but exp has passed —
 * whether that still serves is the RPC's row, decided by the interceptor.
 */
export type BearerCheck =
  | { readonly kind: 'verified'; readonly token: string; readonly claims: AgentTokenClaims }
  | { readonly kind: 'expired'; readonly token: string; readonly error: AgentTokenError }
  | { readonly kind: 'runner-session'; readonly runner: RunnerSessionIdentity }
  | { readonly kind: 'worker'; readonly token: string; readonly claims: WorkerTokenClaims }
  /** no bearer, on the exchange RPC only: the gate let the bounded body through */
  | { readonly kind: 'exchange-body' };

/** What verifying a bearer can find (a runner session has none). */
type TokenCheck = Exclude<BearerCheck, { kind: 'runner-session' } | { kind: 'exchange-body' }>;

/** Set by the agent server from the gate's result; absent when the service runs without the gate. */
export const ADMITTED_BEARER = createContextKey<BearerCheck | undefined>(undefined, {
  description: 'leoflow agent bearer verified at admission',
});

export interface AgentAuthenticationDeps {
  /** the caching verifier in production */
  verifier: AgentTokenVerification;
  clock: Clock;
  /**
   * The session bindings (attempts/session-binding.ts). Without them no attempt RPC past
   * Register is served at all: the binding is what makes a copied token worthless.
   */
  sessions?: Pick<SessionBindings, 'check' | 'refused'> &
    Partial<Pick<SessionBindings, 'agentMasks'>>;
  /**
   * Warm-pool worker tokens; without it (warm pools off) a worker token is just an invalid
   * bearer. Tried only after the attempt verifier refused the token: the audiences differ, so
   * one token can never verify as both.
   */
  workerVerifier?: WorkerTokenVerification;
  /**
   * Warm pools: is the token's pod still a serving member of its pool? A recycled or deleted
   * pod's token, though its signature and exp still hold, then opens nothing (Register included).
   */
  workerServing?: (claims: WorkerTokenClaims) => Promise<boolean>;
}

export interface AgentAuthentication {
  /**
   * The pre-body gate: from the Authorization header alone, a caller may send a body only with a
   * bearer this control plane signed (an expired one included) — or, without a bearer, from
   * inside a runner's door session (`session`), as that runner. Undefined = refuse.
   */
  admit(
    authorization: string | null | undefined,
    session?: RunnerSessionIdentity,
  ): Promise<BearerCheck | undefined>;
  /** Puts the principal on the call context, or refuses the call as Unauthenticated. */
  interceptor: Interceptor;
}

const BEARER = /^Bearer\s+(\S+)$/i;

function bearerToken(authorization: string | null | undefined): string | undefined {
  const m = authorization ? BEARER.exec(authorization) : null;
  return m?.[1] || undefined;
}

function unauthenticated(err: unknown): ConnectError {
  const reason = err instanceof AgentTokenError ? err.reason : 'invalid';
  return new ConnectError(
    reason === 'expired' ? 'agent token expired' : 'invalid agent token',
    Code.Unauthenticated,
  );
}

export function createAgentAuthentication(deps: AgentAuthenticationDeps): AgentAuthentication {
  return {
    async admit(authorization, session) {
      const token = bearerToken(authorization);
      if (!token) return session ? { kind: 'runner-session', runner: { ...session } } : undefined;
      try {
        return await verifyBearer(deps, token);
      } catch {
        return undefined;
      }
    },

    interceptor: (next) => async (req) => {
      const row: AgentRpcAccessRow | undefined = Object.hasOwn(
        AGENT_RPC_ACCESS,
        req.method.localName,
      )
        ? AGENT_RPC_ACCESS[req.method.localName as AgentRpcName]
        : undefined;
      let bearer = req.contextValues.get(ADMITTED_BEARER);
      if (row?.exchange === 'body-credential') {
        // Gate in front: it admitted this only as exchange-body. No gate (the in-process
        // router of the tests): the same rule from the header.
        const anonymous = bearer
          ? bearer.kind === 'exchange-body'
          : !bearerToken(req.header.get('authorization'));
        if (!anonymous) {
          // A Leoflow bearer buys nothing here: the exchange takes a platform credential only.
          throw new ConnectError('this RPC is not open to agents', Code.PermissionDenied);
        }
        return next(req);
      }
      if (bearer?.kind === 'exchange-body') {
        throw new ConnectError('missing or invalid agent token', Code.Unauthenticated);
      }
      if (bearer?.kind === 'runner-session') {
        if (row?.runner !== 'door-session') {
          throw new ConnectError(
            "this RPC needs the attempt's own token, not the runner session",
            Code.Unauthenticated,
          );
        }
        const principal: RunnerPrincipal = { kind: 'runner', ...bearer.runner };
        req.contextValues.set(AGENT_PRINCIPAL, principal);
        return next(req);
      }
      let refusal: unknown;
      if (!bearer) {
        // No gate in front (the in-process router transport of the tests): verify here. A
        // failure is reported after the access check below, as the gate would have ordered it.
        const token = bearerToken(req.header.get('authorization'));
        if (token) {
          try {
            bearer = await verifyBearer(deps, token);
          } catch (err) {
            refusal = err;
          }
        }
      }
      if (bearer?.kind === 'worker') {
        if (row?.worker !== 'worker-token') {
          throw new ConnectError(WORKER_TOKEN_REFUSAL, Code.PermissionDenied);
        }
        if (deps.workerServing && !(await deps.workerServing(bearer.claims))) {
          throw new ConnectError(WORKER_NOT_SERVING, Code.Unauthenticated);
        }
        const principal: WorkerPrincipal = {
          kind: 'worker',
          claims: bearer.claims,
          token: bearer.token,
        };
        req.contextValues.set(AGENT_PRINCIPAL, principal);
        return next(req);
      }
      const access = row?.attempt;
      if (!access) {
        throw new ConnectError(
          row?.runner
            ? 'this RPC is open to runners in their door session only'
            : 'this RPC is not open to agents',
          Code.PermissionDenied,
        );
      }
      if (refusal !== undefined) throw unauthenticated(refusal);
      if (!bearer) throw new ConnectError('missing authorization token', Code.Unauthenticated);
      let principal: AttemptPrincipal;
      if (bearer.kind === 'verified') {
        principal = { kind: 'attempt', claims: bearer.claims, expired: false };
      } else if (access === 'unexpired-or-session-bound') {
        principal = { kind: 'attempt', claims: await expiredClaims(deps, bearer), expired: true };
      } else {
        throw unauthenticated(bearer.error);
      }
      const rpc = req.method.localName as AgentRpcName;
      if (AGENT_RPC_SESSION[rpc] === 'required') {
        await requireSession(deps, principal.claims, req.header.get(SESSION_HEADER) ?? '', rpc);
        const masks = deps.sessions?.agentMasks?.(principal.claims);
        if (masks !== undefined) principal = { ...principal, agentMasksSecrets: masks };
      }
      req.contextValues.set(AGENT_PRINCIPAL, principal);
      return next(req);
    },
  };
}

/** Verifies once; throws (invalid) only for a bearer whose signature or claims do not hold. */
async function verifyBearer(deps: AgentAuthenticationDeps, token: string): Promise<TokenCheck> {
  const { verifier, clock } = deps;
  try {
    return { kind: 'verified', token, claims: await verifier.verify(token, clock.now()) };
  } catch (err) {
    if (err instanceof AgentTokenError && err.reason === 'expired') {
      return { kind: 'expired', token, error: err };
    }
    if (deps.workerVerifier) {
      try {
        return {
          kind: 'worker',
          token,
          claims: await deps.workerVerifier.verify(token, clock.now()),
        };
      } catch (werr) {
        // An expired worker token is never served (no worker RPC is open past exp): the
        // worker's renewal arrives on its stream long before.
        if (werr instanceof WorkerTokenError && werr.reason === 'expired') {
          throw new AgentTokenError('expired');
        }
      }
    }
    throw err;
  }
}

/**
 * An expired credential is considered when everything but its expiry verifies; whether it
 * serves is then the session check's (the key bound at Register) — a copy alone cannot act.
 */
async function expiredClaims(
  deps: AgentAuthenticationDeps,
  bearer: Extract<BearerCheck, { kind: 'expired' }>,
): Promise<AgentTokenClaims> {
  const { verifier, clock } = deps;
  if (!verifier.verifyIgnoringExpiry || !deps.sessions) throw unauthenticated(bearer.error);
  try {
    return await verifier.verifyIgnoringExpiry(bearer.token, clock.now());
  } catch (e) {
    throw unauthenticated(e);
  }
}

/**
 * The session rule of an attempt RPC: every call after Register carries the key bound there.
 * A store that cannot say answers Unavailable (the agent retries), never a grant.
 */
async function requireSession(
  deps: AgentAuthenticationDeps,
  claims: AgentTokenClaims,
  sessionKey: string,
  rpc: string,
): Promise<void> {
  if (!deps.sessions) {
    throw new ConnectError(unboundMessage('unregistered'), Code.Unauthenticated);
  }
  let verdict: SessionVerdict;
  try {
    verdict = await deps.sessions.check(claims, sessionKey);
  } catch {
    throw new ConnectError(
      "the attempt's session binding could not be read; retry",
      Code.Unavailable,
    );
  }
  if (verdict === 'bound') return;
  await deps.sessions.refused(claims, rpc, verdict);
  throw new ConnectError(unboundMessage(verdict), Code.Unauthenticated);
}

/**
 * The attempt calling this RPC. Fails closed: a service mounted without the authentication
 * interceptor answers every call Unauthenticated.
 */
export function attemptPrincipal(ctx: HandlerContext): AttemptPrincipal {
  const principal = ctx.values.get(AGENT_PRINCIPAL);
  if (!principal) throw new ConnectError('missing authorization token', Code.Unauthenticated);
  if (principal.kind !== 'attempt') {
    throw new ConnectError("this RPC needs the attempt's own token", Code.Unauthenticated);
  }
  return principal;
}

/** The warm-pool worker calling this RPC with its worker token. Fails closed. */
export function workerPrincipal(ctx: HandlerContext): WorkerPrincipal {
  const principal = ctx.values.get(AGENT_PRINCIPAL);
  if (principal?.kind !== 'worker') {
    throw new ConnectError('this RPC needs a warm-pool worker token', Code.PermissionDenied);
  }
  return principal;
}

/** The runner calling this RPC from its door session. Fails closed like attemptPrincipal. */
export function runnerPrincipal(ctx: HandlerContext): RunnerPrincipal {
  const principal = ctx.values.get(AGENT_PRINCIPAL);
  if (principal?.kind !== 'runner') {
    throw new ConnectError(
      'this RPC is open to runners in their door session only',
      Code.PermissionDenied,
    );
  }
  return principal;
}
