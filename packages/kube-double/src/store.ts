// The in-memory object store: one global, monotonically increasing resourceVersion (as etcd's
// revision), and an event history that watches resume from until it is compacted.
import { randomUUID } from 'node:crypto';
import { rfc3339, type Clock } from './clock.js';
import { clone, type KubeObject } from './objects.js';
import { groupVersion, type ResourceType } from './resources.js';
import { alreadyExists, gone, notFound, staleUpdate } from './status.js';

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface StoreEvent {
  type: WatchEventType;
  resourceType: ResourceType;
  object: KubeObject;
  /** The object before a MODIFIED event (selector-filtered watches turn a leaver into DELETED). */
  previous?: KubeObject;
  revision: number;
}

export type StoreListener = (event: StoreEvent) => void;

function keyOf(type: ResourceType, namespace: string | undefined, name: string): string {
  return `${type.group}/${type.resource}/${type.namespaced ? (namespace ?? '') : ''}/${name}`;
}

export class ObjectStore {
  private readonly objects = new Map<string, KubeObject>();
  private readonly history: StoreEvent[] = [];
  private readonly listeners = new Set<StoreListener>();
  private revision = 1;
  /** The oldest revision a watch may still resume after (etcd's compact revision). */
  private compactedThrough = 0;

  constructor(
    private readonly clock: Clock,
    private readonly historyLimit = 10_000,
  ) {}

  currentRevision(): number {
    return this.revision;
  }

  /** The stored object, typed as the caller knows its kind to be. */
  get<T extends KubeObject = KubeObject>(
    type: ResourceType,
    namespace: string | undefined,
    name: string,
  ): T | undefined {
    const found = this.objects.get(keyOf(type, namespace, name));
    return found === undefined ? undefined : (clone(found) as T);
  }

  mustGet(type: ResourceType, namespace: string | undefined, name: string): KubeObject {
    const found = this.get(type, namespace, name);
    if (found === undefined) throw notFound(type, name);
    return found;
  }

  list(type: ResourceType, namespace?: string): KubeObject[] {
    const prefix = `${type.group}/${type.resource}/${type.namespaced && namespace !== undefined ? `${namespace}/` : ''}`;
    const found: KubeObject[] = [];
    for (const [key, object] of this.objects) {
      if (key.startsWith(prefix)) found.push(clone(object));
    }
    return found.sort((a, b) =>
      `${a.metadata.namespace ?? ''}/${a.metadata.name ?? ''}`.localeCompare(
        `${b.metadata.namespace ?? ''}/${b.metadata.name ?? ''}`,
      ),
    );
  }

  create(type: ResourceType, input: KubeObject): KubeObject {
    const object = clone(input);
    const name = object.metadata.name ?? '';
    const key = keyOf(type, object.metadata.namespace, name);
    if (this.objects.has(key)) throw alreadyExists(type, name);
    object.apiVersion = groupVersion(type);
    object.kind = type.kind;
    object.metadata.uid = randomUUID();
    object.metadata.creationTimestamp = rfc3339(this.clock.now());
    if (object.spec !== undefined && isGenerationTracked(type)) object.metadata.generation = 1;
    return this.commit('ADDED', type, key, object);
  }

  /**
   * Replaces a stored object. A caller-supplied resourceVersion must match the stored one (an
   * optimistic-concurrency precondition); an empty one is an unconditional update.
   */
  update(type: ResourceType, input: KubeObject): KubeObject {
    const object = clone(input);
    const name = object.metadata.name ?? '';
    const key = keyOf(type, object.metadata.namespace, name);
    const existing = this.objects.get(key);
    if (existing === undefined) throw notFound(type, name);
    const expected = object.metadata.resourceVersion;
    if (
      expected !== undefined &&
      expected !== '' &&
      expected !== existing.metadata.resourceVersion
    ) {
      throw staleUpdate(type, name);
    }
    object.apiVersion = groupVersion(type);
    object.kind = type.kind;
    object.metadata.uid = existing.metadata.uid;
    object.metadata.creationTimestamp = existing.metadata.creationTimestamp;
    if (isGenerationTracked(type)) {
      const generation = existing.metadata.generation ?? 1;
      object.metadata.generation =
        JSON.stringify(object.spec) === JSON.stringify(existing.spec) ? generation : generation + 1;
    }
    if (JSON.stringify(withoutVersion(object)) === JSON.stringify(withoutVersion(existing))) {
      // A no-op write keeps its resourceVersion and emits no event, as the apiserver does.
      return clone(existing);
    }
    return this.commit('MODIFIED', type, key, object, existing);
  }

  remove(type: ResourceType, namespace: string | undefined, name: string): KubeObject {
    const key = keyOf(type, namespace, name);
    const existing = this.objects.get(key);
    if (existing === undefined) throw notFound(type, name);
    this.objects.delete(key);
    const removed = clone(existing);
    this.revision += 1;
    removed.metadata.resourceVersion = String(this.revision);
    this.record({ type: 'DELETED', resourceType: type, object: removed, revision: this.revision });
    return clone(removed);
  }

  /** Forgets the event history up to now, as an etcd compaction does: older watches get 410. */
  compact(): void {
    this.history.length = 0;
    this.compactedThrough = this.revision;
  }

  /**
   * Subscribes to events after `afterRevision`, first replaying the retained history; throws 410
   * Expired when that revision has been compacted away.
   */
  watchFrom(afterRevision: number, listener: StoreListener): () => void {
    if (afterRevision < this.compactedThrough) {
      throw gone(`too old resource version: ${afterRevision} (${this.compactedThrough + 1})`);
    }
    for (const event of this.history) {
      if (event.revision > afterRevision) listener(cloneEvent(event));
    }
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private commit(
    type: WatchEventType,
    resourceType: ResourceType,
    key: string,
    object: KubeObject,
    previous?: KubeObject,
  ) {
    this.revision += 1;
    object.metadata.resourceVersion = String(this.revision);
    this.objects.set(key, object);
    const event: StoreEvent = {
      type,
      resourceType,
      object: clone(object),
      revision: this.revision,
    };
    if (previous !== undefined) event.previous = clone(previous);
    this.record(event);
    return clone(object);
  }

  private record(event: StoreEvent): void {
    this.history.push(event);
    if (this.history.length > this.historyLimit) {
      const dropped = this.history.shift();
      if (dropped !== undefined) this.compactedThrough = dropped.revision;
    }
    // A listener may write (the scheduler binds, the kubelet reports status): its events queue
    // behind this one, so every listener sees every event in revision order.
    this.pending.push(event);
    if (this.dispatching) return;
    this.dispatching = true;
    try {
      for (let next = this.pending.shift(); next !== undefined; next = this.pending.shift()) {
        for (const listener of [...this.listeners]) listener(cloneEvent(next));
      }
    } finally {
      this.dispatching = false;
    }
  }

  private readonly pending: StoreEvent[] = [];
  private dispatching = false;
}

function cloneEvent(event: StoreEvent): StoreEvent {
  const copy: StoreEvent = { ...event, object: clone(event.object) };
  if (event.previous !== undefined) copy.previous = clone(event.previous);
  return copy;
}

function withoutVersion(object: KubeObject): KubeObject {
  const copy = clone(object);
  delete copy.metadata.resourceVersion;
  delete copy.metadata.managedFields;
  return copy;
}

function isGenerationTracked(type: ResourceType): boolean {
  return type.resource !== 'pods' && type.resource !== 'events';
}
