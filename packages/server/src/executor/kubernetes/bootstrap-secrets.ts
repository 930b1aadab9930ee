import type { CoreV1Api, V1Secret } from '@kubernetes/client-node';
import type { AttemptIdentity } from '../../auth/agent-token.js';
import {
  BOOTSTRAP_SECRET_COMPONENT,
  BOOTSTRAP_SECRET_KEY,
  bootstrapSecretName,
  newBootstrapValue,
} from './exchange/bootstrap-secret.js';
import { LABEL, MANAGED_BY, labelValue } from './labels.js';

/**
 * The per-attempt bootstrap Secrets of auth.exchange_bootstrap=secret_key_ref, as the executor
 * handles them: created before the pod (so the kubelet never meets a missing reference), owned
 * by the pod once its uid is known (garbage collection removes it with the pod), and deleted
 * outright when the attempt ends or its pod cannot be made. The exchange deletes it too, right
 * after a successful exchange.
 */
export class BootstrapSecrets {
  constructor(
    private readonly core: CoreV1Api,
    private readonly labels: { instance: string; executor: string },
  ) {}

  /** The Secret for one attempt's pod. Its value is fresh and appears nowhere else. */
  build(namespace: string, podName: string, identity: AttemptIdentity): V1Secret {
    const name = bootstrapSecretName(podName);
    return {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'Opaque',
      metadata: {
        name,
        namespace,
        labels: {
          [LABEL.managedBy]: MANAGED_BY,
          [LABEL.component]: BOOTSTRAP_SECRET_COMPONENT,
          [LABEL.instance]: labelValue(this.labels.instance),
          [LABEL.executor]: labelValue(this.labels.executor),
          [LABEL.tenant]: labelValue(identity.tenant_id),
          [LABEL.taskInstance]: labelValue(identity.task_instance_id),
          [LABEL.try]: String(identity.try_number),
          [LABEL.dispatchGen]: String(identity.dispatch_gen ?? 0),
        },
      },
      // base64 of a value only a Secret read (or the pod's own env) reveals
      data: {
        [BOOTSTRAP_SECRET_KEY]: Buffer.from(newBootstrapValue({ namespace, name })).toString(
          'base64',
        ),
      },
    };
  }

  /** true = created now; false = it existed already (a retried start of the same dispatch). */
  async create(secret: V1Secret): Promise<boolean> {
    try {
      await this.core.createNamespacedSecret({
        namespace: secret.metadata!.namespace!,
        body: secret,
      });
      return true;
    } catch (err) {
      if ((err as { code?: unknown })?.code === 409) return false;
      throw err;
    }
  }

  /** Makes the pod the Secret's one controller owner (uid from the pod create's answer). */
  async own(namespace: string, podName: string, podUid: string): Promise<void> {
    await this.core.patchNamespacedSecret({
      namespace,
      name: bootstrapSecretName(podName),
      body: [
        {
          op: 'add',
          path: '/metadata/ownerReferences',
          value: [
            {
              apiVersion: 'v1',
              kind: 'Pod',
              name: podName,
              uid: podUid,
              controller: true,
              blockOwnerDeletion: false,
            },
          ],
        },
      ],
    });
  }

  /** Best effort and idempotent: a Secret already gone is the goal reached. */
  async remove(namespace: string, podName: string): Promise<void> {
    try {
      await this.core.deleteNamespacedSecret({ namespace, name: bootstrapSecretName(podName) });
    } catch (err) {
      if ((err as { code?: unknown })?.code !== 404) throw err;
    }
  }
}
