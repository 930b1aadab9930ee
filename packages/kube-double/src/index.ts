export {
  startKubeDouble,
  DEFAULT_ISSUER,
  type KubeDouble,
  type KubeDoubleOptions,
} from './double.js';
export { KubeApiServer, ADMIN_USER } from './apiserver.js';
export { ManualClock, systemClock, type Clock } from './clock.js';
export { ObjectStore } from './store.js';
export {
  ServiceAccountTokens,
  CLOCK_LEEWAY_SECONDS,
  MIN_EXPIRATION_SECONDS,
  type TokenClaims,
  type UserInfo,
} from './service-account-tokens.js';
export { RESOURCE_TYPES, findResourceType, type ResourceType } from './resources.js';
export { writeKubeconfig, kubeconfigDocument } from './kubeconfig.js';
export type * from './objects.js';
export {
  Kubelet,
  startKubelet,
  VOLUME_ROOT_ENV,
  type ImageSpec,
  type KubeletOptions,
} from './kubelet.js';
export {
  startRealKube,
  realKubeBinaries,
  realKubeAvailable,
  realKubeRequired,
  realKubeWanted,
  REAL_KUBE_ISSUER,
  REAL_KUBE_VERSION,
  type RealKube,
  type RealKubeOptions,
  type ClientCertificate,
} from './real-apiserver.js';
export {
  startApiServer,
  API_SERVER_KINDS,
  type ApiServerKind,
  type ApiServerHandle,
  type ApiReply,
  type StartApiServerOptions,
} from './api-handle.js';
