// The shapes of the Kubernetes objects the double reads fields of. Objects are stored as the JSON the
// client sent (plus server-set metadata), so every field the double does not interpret round-trips.

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
}

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: OwnerReference[];
  managedFields?: unknown[];
}

/** Any stored object: typed metadata, everything else carried as the client sent it. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  [field: string]: unknown;
}

export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: {
    secretKeyRef?: { name: string; key: string; optional?: boolean };
    configMapKeyRef?: { name: string; key: string; optional?: boolean };
    fieldRef?: { fieldPath: string };
  };
}

export interface ResourceList {
  cpu?: string;
  memory?: string;
  [name: string]: string | undefined;
}

export interface Container {
  name: string;
  image?: string;
  command?: string[];
  args?: string[];
  env?: EnvVar[];
  workingDir?: string;
  resources?: { requests?: ResourceList; limits?: ResourceList };
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean; subPath?: string }[];
  terminationMessagePath?: string;
}

export interface ServiceAccountTokenProjection {
  audience?: string;
  expirationSeconds?: number;
  path: string;
}

export interface KeyToPath {
  key: string;
  path: string;
}

export interface Volume {
  name: string;
  projected?: {
    defaultMode?: number;
    sources?: {
      serviceAccountToken?: ServiceAccountTokenProjection;
      configMap?: { name: string; items?: KeyToPath[]; optional?: boolean };
      secret?: { name: string; items?: KeyToPath[]; optional?: boolean };
      downwardAPI?: {
        items?: { path: string; fieldRef?: { fieldPath: string; apiVersion?: string } }[];
      };
    }[];
  };
  secret?: { secretName: string; items?: KeyToPath[]; optional?: boolean; defaultMode?: number };
  configMap?: { name: string; items?: KeyToPath[]; optional?: boolean; defaultMode?: number };
  emptyDir?: Record<string, unknown>;
  hostPath?: { path: string };
}

export interface PodCondition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
  lastProbeTime?: string | null;
}

export interface ContainerState {
  waiting?: { reason?: string; message?: string };
  running?: { startedAt?: string };
  terminated?: {
    exitCode: number;
    signal?: number;
    reason?: string;
    message?: string;
    startedAt?: string;
    finishedAt?: string;
    containerID?: string;
  };
}

export interface ContainerStatus {
  name: string;
  image: string;
  imageID: string;
  ready: boolean;
  restartCount: number;
  started?: boolean;
  state: ContainerState;
  lastState?: ContainerState;
  containerID?: string;
}

export interface PodSpec {
  nodeName?: string;
  nodeSelector?: Record<string, string>;
  serviceAccountName?: string;
  serviceAccount?: string;
  automountServiceAccountToken?: boolean;
  restartPolicy?: string;
  terminationGracePeriodSeconds?: number;
  activeDeadlineSeconds?: number;
  schedulerName?: string;
  containers: Container[];
  initContainers?: Container[];
  volumes?: Volume[];
}

export interface PodStatus {
  phase?: string;
  conditions?: PodCondition[];
  containerStatuses?: ContainerStatus[];
  hostIP?: string;
  hostIPs?: { ip: string }[];
  podIP?: string;
  podIPs?: { ip: string }[];
  startTime?: string;
  reason?: string;
  message?: string;
  qosClass?: string;
}

export interface Pod extends KubeObject {
  spec: PodSpec;
  status?: PodStatus;
}

export interface Secret extends KubeObject {
  data?: Record<string, string>;
  stringData?: Record<string, string>;
  type?: string;
}

export interface ConfigMap extends KubeObject {
  data?: Record<string, string>;
  binaryData?: Record<string, string>;
}

export interface Node extends KubeObject {
  spec?: { unschedulable?: boolean };
  status?: {
    allocatable?: ResourceList;
    capacity?: ResourceList;
    conditions?: {
      type: string;
      status: string;
      reason?: string;
      message?: string;
      lastHeartbeatTime?: string;
      lastTransitionTime?: string;
    }[];
    addresses?: { type: string; address: string }[];
    daemonEndpoints?: { kubeletEndpoint?: { Port: number } };
  };
}

export interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  verbs: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

export interface RoleObject extends KubeObject {
  rules?: PolicyRule[];
}

export interface Subject {
  kind: 'User' | 'Group' | 'ServiceAccount';
  name: string;
  namespace?: string;
  apiGroup?: string;
}

export interface RoleBindingObject extends KubeObject {
  roleRef: { apiGroup: string; kind: 'Role' | 'ClusterRole'; name: string };
  subjects?: Subject[];
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A deep copy of a JSON value: stored objects are never shared with a caller. */
export function clone<T>(value: T): T {
  return structuredClone(value);
}
