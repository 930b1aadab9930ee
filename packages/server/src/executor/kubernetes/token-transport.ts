import type { V1Container, V1Pod } from '@kubernetes/client-node';
import type { ExecutorPosture } from '../executor.js';

/** The environment variable the envvar transport puts the attempt's credential in. */
export const AGENT_TOKEN_ENV = 'LEOFLOW_AGENT_TOKEN';

/**
 * How an attempt's credential reaches the agent in its pod (auth.agent_token_transport). The
 * seam the exchange transport (a projected service-account token exchanged at Register, next
 * issue) plugs into: the pod builder calls it last, so a transport sees the whole pod.
 */
export interface PodTokenTransport {
  readonly name: 'envvar';
  /** what doctor and the executor's posture say of this transport */
  readonly description: string;
  /** the exposure it leaves open, and its fix (doctor's finding); null = none */
  readonly exposure: { what: string; fix: string } | null;
  /** puts the credential where the agent reads it */
  apply(pod: V1Pod, container: V1Container, token: string): void;
}

/**
 * envvar, the default: the per-attempt token is a literal env value on the Pod. The agent reads
 * it at start and strips every LEOFLOW_* variable before the task runs, but the value stays on
 * the Pod object (etcd, `kubectl get pod -o yaml`, anything that logs pod specs) and in the
 * agent's initial environment for the pod's life.
 */
export const envvarTransport: PodTokenTransport = {
  name: 'envvar',
  description: `literal env value ${AGENT_TOKEN_ENV} on the Pod object (auth.agent_token_transport=envvar)`,
  exposure: {
    what: "The Kubernetes executor puts each attempt token as a plaintext env value on its Pod, where any principal that can get pods in the task namespace reads it (kubectl get pod -o yaml, the API, audit logs and controllers that record pod specs) and task code in the pod can read it from the agent's initial environment (/proc/<agent pid>/environ, same uid), until the attempt ends under enforced liveness or the token expires.",
    fix: 'Restrict get/list/watch on pods in the task namespaces to the control plane, run with --secret-liveness-mode enforce, and move to auth.agent_token_transport=exchange (a projected service-account token exchanged once at Register; not in this build yet).',
  },
  apply(_pod, container, token) {
    container.env = [...(container.env ?? []), { name: AGENT_TOKEN_ENV, value: token }];
  },
};

/** The Kubernetes executor's posture: the transport it uses (envvar in this build). */
export function kubernetesPosture(): ExecutorPosture {
  return { tokenTransport: envvarTransport.description };
}
