import {
  AuthorizationV1Api,
  CoreV1Api,
  type KubeConfig,
  type V1Secret,
} from '@kubernetes/client-node';

/** The verbs on Secrets the SecretKeyRef fallback needs in every tenant namespace. */
export const BOOTSTRAP_SECRET_VERBS = ['create', 'get', 'patch', 'delete'] as const;

/**
 * The exchange's apiserver calls under auth.exchange_bootstrap=secret_key_ref: one read of the
 * Secret a bootstrap value names, and its deletion once exchanged (no TokenReview on this path).
 */
export interface BootstrapSecretKube {
  /** null = no such Secret */
  readSecret(namespace: string, name: string): Promise<V1Secret | null>;
  /**
   * true = this call deleted it; false = it was gone already, or (with `exactly`) it is no longer
   * the object read: another replica's exchange won, or it was replaced.
   */
  deleteSecret(
    namespace: string,
    name: string,
    exactly?: { uid: string; resourceVersion: string },
  ): Promise<boolean>;
  /** SelfSubjectAccessReviews: the `verb in namespace` pairs on secrets this control plane lacks */
  missingSecretRights(namespaces: readonly string[]): Promise<string[]>;
}

function statusOf(err: unknown): number | undefined {
  const c = (err as { code?: unknown })?.code;
  return typeof c === 'number' ? c : undefined;
}

export function kubeBootstrapSecretClient(kc: KubeConfig): BootstrapSecretKube {
  const core = kc.makeApiClient(CoreV1Api);
  const authz = kc.makeApiClient(AuthorizationV1Api);
  return {
    async readSecret(namespace, name) {
      try {
        return await core.readNamespacedSecret({ namespace, name });
      } catch (err) {
        if (statusOf(err) === 404) return null;
        throw err;
      }
    },
    async deleteSecret(namespace, name, exactly) {
      try {
        await core.deleteNamespacedSecret({
          namespace,
          name,
          ...(exactly ? { body: { preconditions: { ...exactly } } } : {}),
        });
        return true;
      } catch (err) {
        const status = statusOf(err);
        if (status === 404 || status === 409) return false;
        throw err;
      }
    },
    async missingSecretRights(namespaces) {
      const asks = namespaces.flatMap((namespace) =>
        BOOTSTRAP_SECRET_VERBS.map((verb) => ({ namespace, verb })),
      );
      const answers = await Promise.all(
        asks.map(async ({ namespace, verb }) => {
          const review = await authz.createSelfSubjectAccessReview({
            body: {
              apiVersion: 'authorization.k8s.io/v1',
              kind: 'SelfSubjectAccessReview',
              spec: { resourceAttributes: { group: '', resource: 'secrets', verb, namespace } },
            },
          });
          return review.status?.allowed === true ? null : `${verb} in ${namespace}`;
        }),
      );
      return answers.filter((a): a is string => a !== null);
    },
  };
}
