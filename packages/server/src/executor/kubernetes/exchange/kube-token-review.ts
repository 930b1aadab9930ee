import {
  AuthenticationV1Api,
  AuthorizationV1Api,
  CoreV1Api,
  type KubeConfig,
  type V1Pod,
} from '@kubernetes/client-node';

export { EXCHANGE_AUDIENCE } from './audience.js';

/** What a TokenReview says of a token, reduced to what the exchange checks. */
export type TokenReviewOutcome =
  | {
      readonly authenticated: true;
      readonly username: string;
      readonly audiences: readonly string[];
      readonly extra: Readonly<Record<string, readonly string[]>>;
    }
  /** `detail` is the apiserver's text: for the control-plane log only, never for the agent */
  | { readonly authenticated: false; readonly detail: string };

/** The apiserver calls the exchange makes: one TokenReview, one read of the pod it names. */
export interface ExchangeKubeClient {
  reviewToken(token: string, audiences: readonly string[]): Promise<TokenReviewOutcome>;
  /** null = no such pod */
  readPod(namespace: string, name: string): Promise<V1Pod | null>;
  /** SelfSubjectAccessReview: may this control plane create TokenReviews? */
  canCreateTokenReviews(): Promise<boolean>;
}

function statusOf(err: unknown): number | undefined {
  const c = (err as { code?: unknown })?.code;
  return typeof c === 'number' ? c : undefined;
}

/** The exchange's apiserver calls through @kubernetes/client-node. */
export function kubeExchangeClient(kc: KubeConfig): ExchangeKubeClient {
  const authn = kc.makeApiClient(AuthenticationV1Api);
  const authz = kc.makeApiClient(AuthorizationV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  return {
    async reviewToken(token, audiences) {
      const review = await authn.createTokenReview({
        body: {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenReview',
          spec: { token, audiences: [...audiences] },
        },
      });
      const status = review.status;
      if (!status?.authenticated) {
        return { authenticated: false, detail: status?.error ?? 'not authenticated' };
      }
      return {
        authenticated: true,
        username: status.user?.username ?? '',
        audiences: status.audiences ?? [],
        extra: status.user?.extra ?? {},
      };
    },
    async readPod(namespace, name) {
      try {
        return await core.readNamespacedPod({ namespace, name });
      } catch (err) {
        if (statusOf(err) === 404) return null;
        throw err;
      }
    },
    async canCreateTokenReviews() {
      const review = await authz.createSelfSubjectAccessReview({
        body: {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SelfSubjectAccessReview',
          spec: {
            resourceAttributes: {
              group: 'authentication.k8s.io',
              resource: 'tokenreviews',
              verb: 'create',
            },
          },
        },
      });
      return review.status?.allowed === true;
    },
  };
}
