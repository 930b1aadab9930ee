import type { V1Container, V1Pod } from '@kubernetes/client-node';
import type { ExecutorPosture } from '../executor.js';
import {
  BOOTSTRAP_SECRET_KEY,
  EXCHANGE_BOOTSTRAP_ENV,
  bootstrapSecretName,
} from './exchange/bootstrap-secret.js';
import { EXCHANGE_TOKEN_FILE_ENV, projectedExchangeToken } from './projected-token.js';

/** The environment variable the envvar transport puts the attempt's credential in. */
export const AGENT_TOKEN_ENV = 'LEOFLOW_AGENT_TOKEN';

/**
 * How an attempt's credential reaches the agent in its pod (auth.agent_token_transport). The
 * seam the exchange transport (a projected service-account token exchanged at Register, next
 * issue) plugs into: the pod builder calls it last, so a transport sees the whole pod.
 */
export interface PodTokenTransport {
  readonly name: 'envvar' | 'exchange';
  /**
   * true: the executor mints the attempt token at pod create and hands it to apply(); false: the
   * pod carries no Leoflow credential and the agent obtains it itself (the exchange).
   */
  readonly mintsAtCreate: boolean;
  /**
   * true (auth.exchange_bootstrap=secret_key_ref): the executor creates the pod's bootstrap
   * Secret before the pod, owns it to the pod, and deletes it when the attempt ends. Absent = false.
   */
  readonly bootstrapSecret?: boolean;
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
  mintsAtCreate: true,
  bootstrapSecret: false,
  description: `literal env value ${AGENT_TOKEN_ENV} on the Pod object (auth.agent_token_transport=envvar)`,
  exposure: {
    what: "The Kubernetes executor puts each attempt token as a plaintext env value on its Pod, where any principal that can get pods in the task namespace reads it (kubectl get pod -o yaml, the API, audit logs and controllers that record pod specs) and task code in the pod can read it from the agent's initial environment (/proc/<agent pid>/environ, same uid); once the agent has registered a copy opens nothing without the agent's session key, but a copy used before it registers in its place and receives the attempt's declared secrets, and the real agent's Register then fails the attempt (LF_CREDENTIAL_COPIED).",
    fix: 'Restrict get/list/watch on pods in the task namespaces to the control plane, run with --secret-liveness-mode enforce, and move to auth.agent_token_transport=exchange (a projected service-account token the agent exchanges once for its attempt token; apply deploy/components/exchange).',
  },
  apply(_pod, container, token) {
    container.env = [...(container.env ?? []), { name: AGENT_TOKEN_ENV, value: token }];
  },
};

/**
 * exchange: the Pod carries no Leoflow credential, only a projected service-account token volume
 * (audience leoflow-control-plane, bound to this pod, read-only) and the file's path. The agent
 * trades that token for its attempt token with ExchangeToken, its first call; the control plane
 * checks it with one TokenReview and the pod itself (executor/kubernetes/exchange/token-exchange.ts).
 */
export function exchangeTransport(expirationSeconds = 600): PodTokenTransport {
  return {
    name: 'exchange',
    mintsAtCreate: false,
    bootstrapSecret: false,
    description:
      'projected service-account token (audience leoflow-control-plane) exchanged by the agent for its attempt token; no credential on the Pod object (auth.agent_token_transport=exchange)',
    exposure: null,
    apply(pod, container) {
      const projected = projectedExchangeToken(expirationSeconds);
      pod.spec!.volumes = [...(pod.spec!.volumes ?? []), projected.volume];
      container.volumeMounts = [...(container.volumeMounts ?? []), projected.mount];
      container.env = [
        ...(container.env ?? []),
        { name: EXCHANGE_TOKEN_FILE_ENV, value: projected.file },
      ];
    },
  };
}

/**
 * exchange with auth.exchange_bootstrap=secret_key_ref, for clusters that cannot project a
 * service-account token: the agent's env LEOFLOW_EXCHANGE_BOOTSTRAP comes from
 * valueFrom.secretKeyRef of the pod's own per-attempt Secret (`<pod>-bootstrap`, created first by
 * the executor); the Pod object holds the Secret's name only, never its value.
 */
export const secretKeyRefExchangeTransport: PodTokenTransport = {
  name: 'exchange',
  mintsAtCreate: false,
  bootstrapSecret: true,
  description:
    'per-attempt bootstrap Secret (secretKeyRef, owned by the pod) exchanged by the agent for its attempt token; no credential on the Pod object (auth.agent_token_transport=exchange, auth.exchange_bootstrap=secret_key_ref)',
  exposure: null,
  apply(pod, container) {
    container.env = [
      ...(container.env ?? []),
      {
        name: EXCHANGE_BOOTSTRAP_ENV,
        valueFrom: {
          secretKeyRef: {
            name: bootstrapSecretName(pod.metadata!.name!),
            key: BOOTSTRAP_SECRET_KEY,
          },
        },
      },
    ];
  },
};

/** The transport auth.agent_token_transport (and, under exchange, auth.exchange_bootstrap) names. */
export function podTokenTransport(
  name: 'envvar' | 'exchange',
  bootstrap: 'projected_token' | 'secret_key_ref' = 'projected_token',
): PodTokenTransport {
  if (name !== 'exchange') return envvarTransport;
  return bootstrap === 'secret_key_ref' ? secretKeyRefExchangeTransport : exchangeTransport();
}

/** The Kubernetes executor's posture: the transport it uses. */
export function kubernetesPosture(transport: PodTokenTransport = envvarTransport): ExecutorPosture {
  return { tokenTransport: transport.description };
}
