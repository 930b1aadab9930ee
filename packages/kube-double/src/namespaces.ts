// Namespace lifecycle: a new namespace gets its `default` ServiceAccount and the
// kube-root-ca.crt ConfigMap (as the service-account and root-CA controllers add them); a deleted
// one turns Terminating, refuses new content, has its content deleted, and goes when it is empty.
import type { ApiContext, ResourceBehaviour } from './behaviours.js';
import { RESOURCE_TYPES } from './resources.js';
import type { ObjectStore } from './store.js';
import { podBehaviour } from './pods.js';

export const namespaceBehaviour: ResourceBehaviour = {
  prepareCreate(object) {
    object.spec = { finalizers: ['kubernetes'] };
    object.status = { phase: 'Active' };
    object.metadata.labels = {
      ...(object.metadata.labels ?? {}),
      'kubernetes.io/metadata.name': object.metadata.name ?? '',
    };
  },

  afterCreate(object, context) {
    const namespace = object.metadata.name ?? '';
    context.store.create(context.type('', 'serviceaccounts'), {
      metadata: { name: 'default', namespace },
    });
    context.store.create(context.type('', 'configmaps'), {
      metadata: { name: 'kube-root-ca.crt', namespace },
      data: { 'ca.crt': context.caCertificate ?? '' },
    });
  },

  delete(current, _options, context) {
    if ((current.status as { phase?: string } | undefined)?.phase === 'Terminating') return current;
    current.metadata.deletionTimestamp = new Date(context.clock.now())
      .toISOString()
      .replace(/\.\d+Z$/, 'Z');
    current.status = { phase: 'Terminating' };
    const marked = context.store.update(context.type('', 'namespaces'), current);
    finalizeNamespace(context, marked.metadata.name ?? '');
    return marked;
  },
};

/** Deletes what a terminating namespace still holds; removes the namespace once it is empty. */
export function finalizeNamespace(context: ApiContext, namespace: string): void {
  const store: ObjectStore = context.store;
  const namespaceType = context.type('', 'namespaces');
  const current = store.get(namespaceType, undefined, namespace);
  if (current === undefined || current.metadata.deletionTimestamp === undefined) return;
  let remaining = 0;
  for (const type of RESOURCE_TYPES) {
    if (!type.namespaced || type.ephemeral) continue;
    for (const object of store.list(type, namespace)) {
      if (type.resource === 'pods') {
        if (object.metadata.deletionTimestamp === undefined) {
          podBehaviour.delete?.(object, {}, context);
        }
        if (store.get(type, namespace, object.metadata.name ?? '') !== undefined) remaining += 1;
      } else {
        store.remove(type, namespace, object.metadata.name ?? '');
      }
    }
  }
  if (remaining === 0) store.remove(namespaceType, undefined, namespace);
}
