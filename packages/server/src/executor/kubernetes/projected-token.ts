import type { V1Volume, V1VolumeMount } from '@kubernetes/client-node';
import { EXCHANGE_AUDIENCE } from './exchange/audience.js';

/** Where the agent finds the projected token (a path, never a credential). */
export const EXCHANGE_TOKEN_FILE_ENV = 'LEOFLOW_EXCHANGE_TOKEN_FILE';
export const EXCHANGE_TOKEN_DIR = '/var/run/secrets/leoflow.io/exchange';
export const EXCHANGE_TOKEN_VOLUME = 'leoflow-exchange-token';
/** The apiserver refuses a TokenRequest under ten minutes; the pod builder floors at it. */
export const MIN_PROJECTED_TOKEN_SECONDS = 600;

export interface ProjectedExchangeToken {
  volume: V1Volume;
  mount: V1VolumeMount;
  /** the file's path in the container */
  file: string;
}

/**
 * The projected service-account token a pod exchanges (audience leoflow-control-plane, bound to
 * the pod by the kubelet, read-only). Shared by attempt pods and warm-pool pods.
 */
export function projectedExchangeToken(expirationSeconds: number): ProjectedExchangeToken {
  const seconds = Math.max(MIN_PROJECTED_TOKEN_SECONDS, Math.floor(expirationSeconds) || 0);
  return {
    volume: {
      name: EXCHANGE_TOKEN_VOLUME,
      projected: {
        defaultMode: 0o400,
        sources: [
          {
            serviceAccountToken: {
              audience: EXCHANGE_AUDIENCE,
              expirationSeconds: seconds,
              path: 'token',
            },
          },
        ],
      },
    },
    mount: { name: EXCHANGE_TOKEN_VOLUME, mountPath: EXCHANGE_TOKEN_DIR, readOnly: true },
    file: `${EXCHANGE_TOKEN_DIR}/token`,
  };
}
