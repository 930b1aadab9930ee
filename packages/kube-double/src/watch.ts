// Watch streams: newline-delimited JSON watch events over a chunked response, resumed from a
// resourceVersion, filtered by namespace and selectors (an object that stops matching is sent as
// DELETED, one that starts matching as ADDED, as the watch cache does), with BOOKMARK events when
// the client allows them and the initial-events-end bookmark for sendInitialEvents.
//
// Bookmarks follow the watch cache: one about 2 s before the watch's timeout and one every
// bookmark interval, each only when the resource's resourceVersion has moved past the last event
// this watch was sent (a change it did not see, e.g. in another namespace). A compacted
// resourceVersion is answered with an ERROR event carrying 410 Expired, worded as the watch cache
// words it, or as etcd does for events (which the apiserver serves without a watch cache).
import type { ServerResponse } from 'node:http';
import type { KubeObject } from './objects.js';
import { groupVersion, type ResourceType } from './resources.js';
import type { Selector } from './selectors.js';
import type { ObjectStore, StoreEvent } from './store.js';
import { KubeApiError } from './status.js';

export interface WatchRequest {
  type: ResourceType;
  namespace?: string;
  matches: Selector;
  /** undefined / '' / '0': start from now with a synthetic ADDED per existing object. */
  resourceVersion?: string;
  allowBookmarks: boolean;
  sendInitialEvents?: boolean;
  timeoutSeconds?: number;
  /** Turns an object into what the client asked for (a Table row, or the object itself). */
  render: (object: KubeObject) => unknown;
}

export class WatchHub {
  private readonly bookmarkers = new Set<() => void>();

  constructor(
    private readonly store: ObjectStore,
    private readonly bookmarkIntervalMs: number,
  ) {}

  /** Sends a BOOKMARK on every open watch that allows them (tests call this instead of waiting). */
  emitBookmarks(): void {
    for (const emit of [...this.bookmarkers]) emit();
  }

  openWatches(): number {
    return this.bookmarkers.size;
  }

  serve(request: WatchRequest, response: ServerResponse): void {
    const { type, namespace } = request;
    const inScope = (object: KubeObject) =>
      !type.namespaced || namespace === undefined || object.metadata.namespace === namespace;
    const visible = (object: KubeObject | undefined) =>
      object !== undefined && inScope(object) && request.matches(object);

    const rv = request.resourceVersion;
    const unversioned = rv === undefined || rv === '' || rv === '0';
    const initialEvents = request.sendInitialEvents ?? unversioned;
    const fromNow = unversioned || initialEvents;
    let after: number;
    if (fromNow) after = this.store.currentRevision();
    else {
      after = Number(rv);
      if (!Number.isInteger(after) || after < 0) {
        throw new KubeApiError(400, 'BadRequest', `invalid resource version: ${rv}`);
      }
    }

    response.writeHead(200, {
      'Content-Type': 'application/json',
      'Cache-Control': 'no-cache, private',
      'Transfer-Encoding': 'chunked',
    });
    // Headers go out at once, as the apiserver sends them: a client waiting for a quiet watch's
    // response headers could not tell an open watch from a hung server.
    response.flushHeaders();
    let lastRevision = after;
    /** what this watch has been told: the start, then each event or bookmark it was sent */
    let sentRevision = after;
    let closed = false;
    const write = (event: { type: string; object: unknown }) => {
      if (!closed) response.write(`${JSON.stringify(event)}\n`);
    };
    const bookmark = (annotations?: Record<string, string>) => {
      const metadata: Record<string, unknown> = {
        resourceVersion: String(lastRevision),
        creationTimestamp: null,
      };
      if (annotations !== undefined) metadata.annotations = annotations;
      write({
        type: 'BOOKMARK',
        object: { kind: type.kind, apiVersion: groupVersion(type), metadata },
      });
    };

    if (initialEvents) {
      for (const object of this.store.list(type, type.namespaced ? namespace : undefined)) {
        if (visible(object)) write({ type: 'ADDED', object: request.render(object) });
      }
      if (request.sendInitialEvents === true) bookmark({ 'k8s.io/initial-events-end': 'true' });
    }

    const send = (eventType: string, object: KubeObject, revision: number) => {
      write({ type: eventType, object: request.render(object) });
      sentRevision = revision;
    };
    const onEvent = (event: StoreEvent) => {
      if (event.resourceType !== type) return;
      lastRevision = event.revision;
      const now = visible(event.object);
      const before = visible(event.previous);
      if (event.type === 'MODIFIED') {
        if (now && before) send('MODIFIED', event.object, event.revision);
        else if (now) send('ADDED', event.object, event.revision);
        else if (before) send('DELETED', event.object, event.revision);
      } else if (now) {
        send(event.type, event.object, event.revision);
      }
    };
    let unsubscribe: () => void;
    try {
      unsubscribe = this.store.watchFrom(after, onEvent);
    } catch (error) {
      if (error instanceof KubeApiError) {
        // A too-old resourceVersion: the stream opens and carries one ERROR event with the 410.
        const uncached = type.resource === 'events' && error.code === 410;
        const status = uncached
          ? new KubeApiError(
              410,
              'Expired',
              'The resourceVersion for the provided watch is too old.',
            )
          : error;
        write({ type: 'ERROR', object: status.toStatus() });
        response.end();
        return;
      }
      throw error;
    }
    lastRevision = Math.max(lastRevision, this.store.currentRevision());
    if (fromNow) sentRevision = lastRevision;

    const emitBookmark = () => {
      if (!request.allowBookmarks || lastRevision <= sentRevision) return;
      bookmark();
      sentRevision = lastRevision;
    };
    this.bookmarkers.add(emitBookmark);
    const interval = setInterval(emitBookmark, this.bookmarkIntervalMs);
    interval.unref();
    let timeout: NodeJS.Timeout | undefined;
    let beforeTimeout: NodeJS.Timeout | undefined;
    const close = () => {
      if (closed) return;
      closed = true;
      unsubscribe();
      this.bookmarkers.delete(emitBookmark);
      clearInterval(interval);
      if (timeout !== undefined) clearTimeout(timeout);
      if (beforeTimeout !== undefined) clearTimeout(beforeTimeout);
      response.end();
    };
    if (request.timeoutSeconds !== undefined && request.timeoutSeconds > 0) {
      timeout = setTimeout(close, request.timeoutSeconds * 1000);
      timeout.unref();
      beforeTimeout = setTimeout(emitBookmark, Math.max(0, request.timeoutSeconds * 1000 - 2000));
      beforeTimeout.unref();
    }
    response.on('close', close);
    this.closers.add(close);
    response.on('close', () => this.closers.delete(close));
  }

  private readonly closers = new Set<() => void>();

  closeAll(): void {
    for (const close of [...this.closers]) close();
  }
}
