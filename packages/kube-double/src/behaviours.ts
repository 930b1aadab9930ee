// What a resource does beyond generic storage: defaults and admission on create, a custom delete
// (graceful pods, terminating namespaces), a side effect after create.
import type { Clock } from './clock.js';
import type { KubeObject } from './objects.js';
import type { ResourceType } from './resources.js';
import type { ServiceAccountTokens, UserInfo } from './service-account-tokens.js';
import type { ObjectStore } from './store.js';

export interface DeleteOptions {
  gracePeriodSeconds?: number;
  preconditions?: { uid?: string; resourceVersion?: string };
  propagationPolicy?: string;
  dryRun?: string[];
}

export interface ApiContext {
  store: ObjectStore;
  clock: Clock;
  tokens: ServiceAccountTokens;
  user: UserInfo;
  /** The serving CA (PEM), published in each namespace's kube-root-ca.crt ConfigMap. */
  caCertificate?: string;
  type(group: string, resource: string): ResourceType;
}

export interface ResourceBehaviour {
  /** Defaults and admission: mutate `object`, or throw a KubeApiError. */
  prepareCreate?(object: KubeObject, context: ApiContext): void;
  afterCreate?(object: KubeObject, context: ApiContext): void;
  /** Runs on every update (main resource or status) with the stored object. */
  prepareUpdate?(next: KubeObject, current: KubeObject, context: ApiContext): void;
  /** Returns the response body: the object (still terminating, or as deleted). */
  delete?(current: KubeObject, options: DeleteOptions, context: ApiContext): KubeObject;
}
