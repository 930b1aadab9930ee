/**
 * The seam between the token exchange (a projected service-account token → a Leoflow token) and
 * what a pod is for. The exchange proves WHICH pod is calling — one TokenReview, then a read of
 * the pod itself — and hands the result here; what the pod may then do depends on what it is:
 *
 * - an attempt pod carries `leoflow.io/agent-identity` (executor/kubernetes/labels.ts) and gets
 *   that attempt's own token, only while the attempt is live;
 * - a warm-pool pod carries `leoflow.io/worker-pool` instead and gets a worker-scoped token
 *   (Register and AwaitAssignment only, no secret) from the pool that created it.
 *
 * A pod with neither annotation, or with both, is refused.
 */

/** Names the warm pool (its key) a worker pod belongs to; set by the pool, never by a DAG. */
export const WORKER_POOL_ANNOTATION = 'leoflow.io/worker-pool';

/** A pod whose projected token the apiserver has just vouched for, as read back from it. */
export interface ReviewedPod {
  readonly namespace: string;
  readonly name: string;
  /** the uid the token is bound to, equal to the live pod's (a re-created pod is refused earlier) */
  readonly uid: string;
  readonly serviceAccount: string;
  readonly annotations: Readonly<Record<string, string>>;
}

/** A Leoflow token minted for a reviewed pod. */
export interface IssuedToken {
  readonly token: string;
  readonly expiresAtMs: number;
}

/**
 * The warm pools' side of the exchange. `null` means "not a pod of any pool of mine" (an unknown
 * pool key, a pod the pool already recycled, a second exchange by the same pod): the exchange
 * refuses it with the same sanitised error as any other refusal.
 */
export interface WorkerBootstrap {
  issue(pod: ReviewedPod): Promise<IssuedToken | null>;
}
