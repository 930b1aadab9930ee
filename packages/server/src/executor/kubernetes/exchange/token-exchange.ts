import { createHash } from 'node:crypto';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import {
  BootstrapCredentialKind,
  ExchangeTokenResponseSchema,
  LeoflowTokenScope,
  type ExchangeTokenRequest,
  type ExchangeTokenResponse,
} from '@leoflow/protocol';
import { isActive, type Clock } from '@leoflow/core';
import type { Logger } from 'pino';
import type { AttemptIdentity, AgentTokenIssuer } from '../../../auth/agent-token.js';
import { IDENTITY_ANNOTATION, podName } from '../labels.js';
import type { AttemptRecordStore } from '../../../store/ports/attempt-records.js';
import type { RunStore } from '../../../store/ports/runs.js';
import type { TaskInstanceStore } from '../../../store/ports/task-instances.js';
import { EXCHANGE_AUDIENCE } from './audience.js';
import {
  BOOTSTRAP_SECRET_KEY,
  bootstrapSecretName,
  bootstrapValueMatches,
  parseBootstrapLocator,
} from './bootstrap-secret.js';
import type { BootstrapSecretKube } from './kube-bootstrap-secret.js';
import type { ExchangeKubeClient } from './kube-token-review.js';
import { OnceOnly } from './once-only.js';
import { screenProjectedToken } from './projected-token-screen.js';
import { WORKER_POOL_ANNOTATION, type ReviewedPod, type WorkerBootstrap } from './reviewed-pod.js';

const POD_NAME_EXTRA = 'authentication.kubernetes.io/pod-name';
const POD_UID_EXTRA = 'authentication.kubernetes.io/pod-uid';
/** A projected token is a JWT of a few hundred bytes to ~2 KiB; anything far larger is not one. */
const MAX_CREDENTIAL_BYTES = 16 * 1024;
/**
 * Apiserver calls (TokenReview, pod and Secret reads, the Secret's delete) one replica has in
 * flight for exchanges at most; an exchange past it is answered Unavailable (`overloaded`).
 */
export const MAX_CONCURRENT_REVIEWS = 16;
/** How long an exchange waits for one apiserver call: under the agent's 10 s RPC timeout. */
export const APISERVER_CALL_TIMEOUT_MS = 5_000;

/**
 * Why an exchange was refused: the metric label and the control-plane log line. The agent sees
 * only one fixed message per class (REFUSAL_TEXT), never the apiserver's text.
 */
export type ExchangeRefusal =
  | 'malformed'
  | 'replayed'
  | 'not_authenticated'
  | 'not_a_pod'
  | 'pod_gone'
  | 'identity_mismatch'
  | 'not_live'
  | 'unavailable'
  | 'overloaded';

const REFUSAL_TEXT: Record<ExchangeRefusal, { code: Code; message: string }> = {
  malformed: { code: Code.InvalidArgument, message: 'exchange request malformed' },
  replayed: {
    code: Code.PermissionDenied,
    message: 'this pod, or the attempt it names, has already exchanged its bootstrap credential',
  },
  not_authenticated: {
    code: Code.Unauthenticated,
    message: 'bootstrap credential not accepted by the cluster',
  },
  not_a_pod: {
    code: Code.PermissionDenied,
    message: 'bootstrap credential is not bound to a Leoflow pod',
  },
  pod_gone: {
    code: Code.PermissionDenied,
    message: 'the pod this credential names no longer exists',
  },
  identity_mismatch: {
    code: Code.PermissionDenied,
    message: 'bootstrap credential does not match the pod it names',
  },
  not_live: { code: Code.PermissionDenied, message: 'the attempt of this pod is not live' },
  unavailable: {
    code: Code.Unavailable,
    message: 'the control plane could not verify the credential now; retry',
  },
  overloaded: {
    code: Code.Unavailable,
    message: 'the control plane is verifying too many credentials now; retry',
  },
};

export class ExchangeRefused extends ConnectError {
  constructor(readonly refusal: ExchangeRefusal) {
    super(REFUSAL_TEXT[refusal].message, REFUSAL_TEXT[refusal].code);
  }
}

export interface ExchangeMetrics {
  /** one per TokenReview sent to the apiserver */
  tokenReviewed(): void;
  exchanged(outcome: 'attempt' | 'worker' | ExchangeRefusal): void;
}

export interface TokenExchangeDeps {
  kube: ExchangeKubeClient;
  store: Pick<TaskInstanceStore, 'getTaskInstanceById'> & Pick<RunStore, 'getRunById'>;
  /**
   * Where the pod that exchanged for each attempt is recorded, so an attempt is exchanged for
   * once across replicas too; absent = this replica's memory only.
   */
  attemptRecords?: Pick<AttemptRecordStore, 'bindExchangedPod'>;
  tokens: Pick<AgentTokenIssuer, 'mint' | 'ttlSeconds'>;
  clock: Clock;
  logger: Logger;
  /**
   * Where a tenant's attempt pods run and under which service accounts
   * (executor.kubernetes.tenants); undefined = the tenant has no Kubernetes placement.
   */
  tenantPlacement(
    tenantId: string,
  ): { namespace: string; serviceAccounts: readonly string[] } | undefined;
  /**
   * auth.exchange_bootstrap=secret_key_ref: the Secret client and the tenant namespaces a
   * bootstrap Secret may be in; absent = a BOOTSTRAP_SECRET request is refused as malformed.
   */
  bootstrapSecrets?: { kube: BootstrapSecretKube; namespaces: readonly string[] };
  /** warm pools (h-warm); absent = a worker-pool pod is refused */
  workerBootstrap?: WorkerBootstrap;
  metrics?: ExchangeMetrics;
  /** how many exchanged pods are remembered for the replay refusal (per replica) */
  replayMemory?: number;
  /** apiserver calls in flight at most (default MAX_CONCURRENT_REVIEWS) */
  maxConcurrentReviews?: number;
  /** how long one apiserver call may take (default APISERVER_CALL_TIMEOUT_MS) */
  apiserverTimeoutMs?: number;
}

export type TokenExchange = (req: ExchangeTokenRequest) => Promise<ExchangeTokenResponse>;

/** The attempt a pod's identity annotation names (written by the pod builder). */
function annotatedAttempt(
  raw: string | undefined,
): { ti: string; tenant: string; try: number; gen: number } | undefined {
  if (!raw) return undefined;
  try {
    const v = JSON.parse(raw) as Record<string, unknown>;
    if (typeof v.ti !== 'string' || v.ti === '' || typeof v.tenant !== 'string') return undefined;
    if (typeof v.try !== 'number' || typeof v.gen !== 'number') return undefined;
    return { ti: v.ti, tenant: v.tenant, try: v.try, gen: v.gen };
  } catch {
    return undefined;
  }
}

/**
 * The exchange: a projected service-account token in, a Leoflow token out. Exactly one
 * TokenReview per pod (audience leoflow-control-plane) and one read of the pod; everything after
 * is the control plane's own state, so every steady-state RPC stays apiserver-free.
 *
 * A pod exchanges ONCE, and an attempt is exchanged for once. The same token presented again is
 * refused before any TokenReview (by its hash), a second token for an already-exchanged pod (a
 * rotated projection) is refused after it, and so is a second pod naming an attempt already
 * exchanged for: the agent exchanges at start and renews on Heartbeat from then on, so a second
 * exchange is never the agent's own. Only a definite outcome uses a token, pod or attempt up: an
 * exchange refused because the apiserver or the store could not answer (`unavailable`) leaves
 * them free, so the agent's retry is not taken for a replay.
 *
 * Before its TokenReview a projected token passes a screen of its unverified claims (audience,
 * pod binding, exp) and a cap on reviews in flight: the exchange takes no bearer, so without
 * them anyone reaching the agent port could spend the apiserver's budget at will.
 */
export function createTokenExchange(deps: TokenExchangeDeps): TokenExchange {
  const exchanger = new TokenExchanger(deps);
  return (req) => exchanger.exchange(req);
}

/** The exchange's state (its replay memories, the apiserver calls in flight) and its steps. */
class TokenExchanger {
  readonly #deps: TokenExchangeDeps;
  readonly #usedTokens: OnceOnly;
  readonly #exchangedPods: OnceOnly;
  readonly #exchangedAttempts: OnceOnly;
  readonly #maxCalls: number;
  readonly #callTimeoutMs: number;
  #callsInFlight = 0;

  constructor(deps: TokenExchangeDeps) {
    this.#deps = deps;
    this.#usedTokens = new OnceOnly(deps.replayMemory ?? 50_000);
    this.#exchangedPods = new OnceOnly(deps.replayMemory ?? 50_000);
    this.#exchangedAttempts = new OnceOnly(deps.replayMemory ?? 50_000);
    this.#maxCalls = deps.maxConcurrentReviews ?? MAX_CONCURRENT_REVIEWS;
    this.#callTimeoutMs = deps.apiserverTimeoutMs ?? APISERVER_CALL_TIMEOUT_MS;
  }

  /** One exchange request: screened, claimed once by its token's hash, then by its kind. */
  async exchange(req: ExchangeTokenRequest): Promise<ExchangeTokenResponse> {
    if (
      (req.kind !== BootstrapCredentialKind.PROJECTED_SERVICE_ACCOUNT_TOKEN &&
        req.kind !== BootstrapCredentialKind.BOOTSTRAP_SECRET) ||
      req.credential === '' ||
      Buffer.byteLength(req.credential) > MAX_CREDENTIAL_BYTES
    ) {
      return this.#refuse('malformed');
    }
    // Screened before the token's hash is claimed: garbage costs no TokenReview and takes no
    // place in the replay memory.
    if (req.kind === BootstrapCredentialKind.PROJECTED_SERVICE_ACCOUNT_TOKEN) {
      const screen = screenProjectedToken(
        req.credential,
        EXCHANGE_AUDIENCE,
        this.#deps.clock.now(),
      );
      if (screen !== 'plausible') return this.#refuse(screen, { screened: true });
    }
    const tokenKey = createHash('sha256').update(req.credential).digest('hex');
    const claimed = this.#usedTokens.claim(tokenKey);
    if (claimed !== 'claimed') return this.#refuseClaim(claimed);
    let definite = false;
    try {
      const res =
        req.kind === BootstrapCredentialKind.BOOTSTRAP_SECRET
          ? await this.#exchangeSecret(req.credential)
          : await this.#exchangeProjected(req.credential);
      definite = true;
      return res;
    } catch (err) {
      definite = isDefinite(err);
      if (err instanceof ExchangeRefused) throw err;
      // The store (or a pool) failed mid-exchange: nothing was decided, the agent may retry.
      this.#deps.logger.warn({ error: describe(err) }, 'token exchange failed');
      return this.#refuse('unavailable');
    } finally {
      this.#usedTokens.settle(tokenKey, definite);
    }
  }

  #refuse(refusal: ExchangeRefusal, context: Record<string, unknown> = {}): never {
    this.#deps.metrics?.exchanged(refusal);
    this.#deps.logger.info({ ...context, refusal }, 'token exchange refused');
    throw new ExchangeRefused(refusal);
  }

  /** A token, pod or attempt already used is a replay; one in use right now, a retry too soon. */
  #refuseClaim(claim: 'used' | 'busy', context: Record<string, unknown> = {}): never {
    return claim === 'used'
      ? this.#refuse('replayed', context)
      : this.#refuse('unavailable', { ...context, reason: 'the same exchange is under way' });
  }

  /**
   * One apiserver call of an exchange: at most `this.#maxCalls` in flight on this replica (past it:
   * `overloaded`), each given `this.#callTimeoutMs` (past it, or failing: `unavailable`, and the call
   * is abandoned). Either way the exchange decided nothing, so the agent asks again.
   */
  async #apiserver<T>(what: string, call: () => Promise<T>): Promise<T> {
    if (this.#callsInFlight >= this.#maxCalls) {
      return this.#refuse('overloaded', {
        reason: `${this.#maxCalls} apiserver calls already in flight`,
      });
    }
    this.#callsInFlight += 1;
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        call(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`no answer within ${this.#callTimeoutMs} ms`)),
            this.#callTimeoutMs,
          );
        }),
      ]);
    } catch (err) {
      this.#deps.logger.warn({ error: describe(err) }, `${what} failed`);
      return this.#refuse('unavailable');
    } finally {
      clearTimeout(timer);
      this.#callsInFlight -= 1;
    }
  }

  async #reviewed(credential: string): Promise<ReviewedPod> {
    const review = await this.#apiserver('TokenReview', () => {
      this.#deps.metrics?.tokenReviewed();
      return this.#deps.kube.reviewToken(credential, [EXCHANGE_AUDIENCE]);
    });
    if (!review.authenticated) return this.#refuse('not_authenticated', { detail: review.detail });
    if (!review.audiences.includes(EXCHANGE_AUDIENCE)) return this.#refuse('not_authenticated');
    const podName = review.extra[POD_NAME_EXTRA]?.[0];
    const podUid = review.extra[POD_UID_EXTRA]?.[0];
    const user = /^system:serviceaccount:([^:]+):([^:]+)$/.exec(review.username);
    // `kubectl create token` without --bound-object-kind Pod: authenticated, but no pod.
    if (!user || !podName || !podUid) return this.#refuse('not_a_pod');
    const [, namespace, serviceAccount] = user as unknown as [string, string, string];
    if (this.#exchangedPods.has(podUid))
      return this.#refuse('replayed', { namespace, pod: podName });
    const pod = await this.#apiserver('reading the exchanging pod', () =>
      this.#deps.kube.readPod(namespace, podName),
    );
    if (!pod || pod.metadata?.deletionTimestamp)
      return this.#refuse('pod_gone', { namespace, pod: podName });
    if (pod.metadata?.uid !== podUid)
      return this.#refuse('identity_mismatch', { namespace, pod: podName });
    if ((pod.spec?.serviceAccountName ?? 'default') !== serviceAccount) {
      return this.#refuse('identity_mismatch', { namespace, pod: podName });
    }
    return {
      namespace,
      name: podName,
      uid: podUid,
      serviceAccount,
      annotations: { ...(pod.metadata?.annotations ?? {}) },
    };
  }

  /** The live attempt a reviewed pod's identity annotation names, placement checked. */
  async #liveAttempt(pod: ReviewedPod): Promise<AttemptIdentity> {
    const named = annotatedAttempt(pod.annotations[IDENTITY_ANNOTATION]);
    if (!named) return this.#refuse('not_a_pod', { namespace: pod.namespace, pod: pod.name });
    const ti = await this.#deps.store.getTaskInstanceById(named.ti);
    const live =
      ti !== undefined &&
      ti.tenant_id === named.tenant &&
      ti.try_number === named.try &&
      ti.dispatch_gen === named.gen &&
      isActive(ti.state);
    if (!live || !ti) return this.#refuse('not_live', { namespace: pod.namespace, pod: pod.name });
    // The pod must stand where this tenant's attempts run, under one of its service accounts: a
    // pod in another tenant's namespace, or under an account the tenant does not run tasks as,
    // naming this attempt is not its pod.
    const placement = this.#deps.tenantPlacement(ti.tenant_id);
    if (
      !placement ||
      placement.namespace !== pod.namespace ||
      !placement.serviceAccounts.includes(pod.serviceAccount)
    ) {
      return this.#refuse('identity_mismatch', { namespace: pod.namespace, pod: pod.name });
    }
    // The pod the executor made for this dispatch has this name and no other: a pod that copied
    // a live attempt's annotation under any other name is not that attempt's pod.
    if (pod.name !== podName(ti.id, ti.try_number, ti.dispatch_gen, ti.dag_id, ti.task_id)) {
      return this.#refuse('identity_mismatch', { namespace: pod.namespace, pod: pod.name });
    }
    const run = await this.#deps.store.getRunById(ti.dag_run_id);
    if (!run) return this.#refuse('not_live', { namespace: pod.namespace, pod: pod.name });
    const identity: AttemptIdentity = {
      tenant_id: ti.tenant_id,
      dag_id: ti.dag_id,
      dag_run_id: ti.dag_run_id,
      run_id: run.run_id,
      task_id: ti.task_id,
      map_index: ti.map_index,
      try_number: ti.try_number,
      task_instance_id: ti.id,
      dispatch_gen: ti.dispatch_gen,
    };
    return identity;
  }

  /**
   * The attempt token for the pod `podUid`, once per attempt (task instance, try, dispatch): in
   * this replica's memory, and in the attempt's record, which every replica shares.
   */
  async #mint(identity: AttemptIdentity, podUid: string): Promise<ExchangeTokenResponse> {
    const attemptKey = `${identity.task_instance_id}\u0000${identity.try_number}\u0000${identity.dispatch_gen}`;
    const claimed = this.#exchangedAttempts.claim(attemptKey);
    if (claimed !== 'claimed') return this.#refuseClaim(claimed, { attempt: attemptKey });
    const now = this.#deps.clock.now();
    const expiresAtMs = (Math.floor(now / 1000) + this.#deps.tokens.ttlSeconds) * 1000;
    let token: string;
    let bound: 'bound' | 'taken' = 'bound';
    try {
      token = await this.#deps.tokens.mint(identity, now);
      if (this.#deps.attemptRecords) {
        bound = await this.#deps.attemptRecords.bindExchangedPod(
          {
            tenant_id: identity.tenant_id,
            task_instance_id: identity.task_instance_id,
            try_number: identity.try_number,
            dag_id: identity.dag_id,
            dag_run_id: identity.dag_run_id,
            run_id: identity.run_id,
            task_id: identity.task_id,
          },
          identity.dispatch_gen ?? 0,
          podUid,
          now,
          expiresAtMs,
        );
      }
    } catch (err) {
      this.#exchangedAttempts.settle(attemptKey, false);
      throw err;
    }
    this.#exchangedAttempts.settle(attemptKey, true);
    // Another replica minted for this attempt first: the token made here is never handed out.
    if (bound === 'taken')
      return this.#refuse('replayed', { attempt: attemptKey, across: 'replicas' });
    this.#deps.metrics?.exchanged('attempt');
    return create(ExchangeTokenResponseSchema, {
      token,
      scope: LeoflowTokenScope.ATTEMPT,
      expiresAtMs: BigInt(expiresAtMs),
    });
  }

  /**
   * The SecretKeyRef fallback: the value names its Secret; one read of it, a constant-time
   * compare, its one controller owner (the pod), one read of that pod. No TokenReview: the
   * kubelet put the value in the pod's env, and only the pod the Secret is owned by names it.
   */
  async #secretBootstrapped(
    credential: string,
    secrets: NonNullable<TokenExchangeDeps['bootstrapSecrets']>,
  ): Promise<{ pod: ReviewedPod; secret: { uid: string; resourceVersion: string } }> {
    const locator = parseBootstrapLocator(credential);
    if (!locator) return this.#refuse('malformed');
    const { namespace, name } = locator;
    // Only where this control plane puts attempt pods: it asks nothing of any other namespace.
    if (!secrets.namespaces.includes(namespace))
      return this.#refuse('not_authenticated', { namespace });
    const secret = await this.#apiserver('reading the bootstrap Secret', () =>
      secrets.kube.readSecret(namespace, name),
    );
    const stored = secret?.data?.[BOOTSTRAP_SECRET_KEY];
    // Gone (exchanged already, or the attempt ended) or never ours: the same refusal.
    if (!secret || stored === undefined || secret.metadata?.deletionTimestamp) {
      return this.#refuse('not_authenticated', { namespace, secret: name });
    }
    if (!bootstrapValueMatches(credential, Buffer.from(stored, 'base64').toString('utf8'))) {
      return this.#refuse('not_authenticated', { namespace, secret: name });
    }
    const controllers = (secret.metadata?.ownerReferences ?? []).filter((o) => o.controller);
    const owner = controllers[0];
    if (controllers.length !== 1 || !owner || owner.kind !== 'Pod' || owner.apiVersion !== 'v1') {
      return this.#refuse('not_a_pod', { namespace, secret: name });
    }
    if (bootstrapSecretName(owner.name) !== name) {
      return this.#refuse('identity_mismatch', { namespace, secret: name });
    }
    if (this.#exchangedPods.has(owner.uid))
      return this.#refuse('replayed', { namespace, pod: owner.name });
    const pod = await this.#apiserver('reading the exchanging pod', () =>
      this.#deps.kube.readPod(namespace, owner.name),
    );
    if (!pod || pod.metadata?.deletionTimestamp) {
      return this.#refuse('pod_gone', { namespace, pod: owner.name });
    }
    // The same name, another pod (re-created): the Secret was not made for it.
    if (pod.metadata?.uid !== owner.uid) {
      return this.#refuse('identity_mismatch', { namespace, pod: owner.name });
    }
    return {
      pod: {
        namespace,
        name: owner.name,
        uid: owner.uid,
        serviceAccount: pod.spec?.serviceAccountName ?? 'default',
        annotations: { ...(pod.metadata?.annotations ?? {}) },
      },
      secret: {
        uid: secret.metadata?.uid ?? '',
        resourceVersion: secret.metadata?.resourceVersion ?? '',
      },
    };
  }

  async #exchangeSecret(credential: string): Promise<ExchangeTokenResponse> {
    const secrets = this.#deps.bootstrapSecrets;
    if (!secrets) return this.#refuse('malformed');
    const { pod, secret } = await this.#secretBootstrapped(credential, secrets);
    // Warm pools need projected tokens: a worker pod is never bootstrapped from a Secret.
    if (
      pod.annotations[WORKER_POOL_ANNOTATION] !== undefined ||
      pod.annotations[IDENTITY_ANNOTATION] === undefined
    ) {
      return this.#refuse('not_a_pod', { namespace: pod.namespace, pod: pod.name });
    }
    const identity = await this.#liveAttempt(pod);
    // Deleting the Secret (exactly the one read) is what makes the exchange once-only across
    // replicas: of two racing exchanges only one deletion succeeds, and only it mints.
    // An answer lost after the apiserver deleted it leaves the retry nothing to exchange
    // (`not_authenticated`): the one undecided outcome this path cannot give back.
    const deleted = await this.#apiserver('deleting the bootstrap Secret', () =>
      secrets.kube.deleteSecret(pod.namespace, bootstrapSecretName(pod.name), secret),
    );
    if (!deleted) return this.#refuse('replayed', { namespace: pod.namespace, pod: pod.name });
    this.#exchangedPods.markUsed(pod.uid);
    return this.#mint(identity, pod.uid);
  }

  async #exchangeProjected(credential: string): Promise<ExchangeTokenResponse> {
    const pod = await this.#reviewed(credential);
    const forAttempt = pod.annotations[IDENTITY_ANNOTATION] !== undefined;
    const forPool = pod.annotations[WORKER_POOL_ANNOTATION] !== undefined;
    if (forAttempt === forPool)
      return this.#refuse('not_a_pod', { namespace: pod.namespace, pod: pod.name });
    const claimed = this.#exchangedPods.claim(pod.uid);
    if (claimed !== 'claimed')
      return this.#refuseClaim(claimed, { namespace: pod.namespace, pod: pod.name });
    let definite = false;
    try {
      const res = forAttempt
        ? await this.#mint(await this.#liveAttempt(pod), pod.uid)
        : await this.#workerToken(pod);
      definite = true;
      return res;
    } catch (err) {
      definite = isDefinite(err);
      throw err;
    } finally {
      this.#exchangedPods.settle(pod.uid, definite);
    }
  }

  async #workerToken(pod: ReviewedPod): Promise<ExchangeTokenResponse> {
    const issued = this.#deps.workerBootstrap ? await this.#deps.workerBootstrap.issue(pod) : null;
    if (!issued) return this.#refuse('not_a_pod', { namespace: pod.namespace, pod: pod.name });
    this.#deps.metrics?.exchanged('worker');
    return create(ExchangeTokenResponseSchema, {
      token: issued.token,
      scope: LeoflowTokenScope.WORKER,
      expiresAtMs: BigInt(issued.expiresAtMs),
    });
  }
}

/** A refusal that asking again cannot change; `unavailable`, `overloaded` and unexpected failures can. */
function isDefinite(err: unknown): boolean {
  return (
    err instanceof ExchangeRefused && err.refusal !== 'unavailable' && err.refusal !== 'overloaded'
  );
}

/** An apiserver failure as a short class (no body, no URL, no token). */
function describe(err: unknown): string {
  const e = err as { code?: unknown; cause?: { code?: unknown } };
  if (typeof e?.code === 'number') return `HTTP ${e.code}`;
  const sys = typeof e?.code === 'string' ? e.code : e?.cause?.code;
  return typeof sys === 'string' && /^[A-Z_]{2,40}$/.test(sys)
    ? `network error ${sys}`
    : 'request failed';
}
