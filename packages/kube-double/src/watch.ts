// Watch streams: newline-delimited JSON watch events over a chunked response, resumed from a
// resourceVersion, filtered by namespace and selectors (an object that stops matching is sent as
// DELETED, one that starts matching as ADDED, as the watch cache does), with BOOKMARK events when
// the client allows them and the initial-events-end bookmark for sendInitialEvents.
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

    const onEvent = (event: StoreEvent) => {
      if (event.resourceType !== type) return;
      lastRevision = event.revision;
      const now = visible(event.object);
      const before = visible(event.previous);
      if (event.type === 'MODIFIED') {
        if (now && before) write({ type: 'MODIFIED', object: request.render(event.object) });
        else if (now) write({ type: 'ADDED', object: request.render(event.object) });
        else if (before) write({ type: 'DELETED', object: request.render(event.object) });
      } else if (now) {
        write({ type: event.type, object: request.render(event.object) });
      }
    };
    let unsubscribe: () => void;
    try {
      unsubscribe = this.store.watchFrom(after, onEvent);
    } catch (error) {
      if (error instanceof KubeApiError) {
        // A too-old resourceVersion: the stream opens and carries one ERROR event with the 410.
        write({ type: 'ERROR', object: error.toStatus() });
        response.end();
        return;
      }
      throw error;
    }
    lastRevision = Math.max(lastRevision, this.store.currentRevision());

    const emitBookmark = () => {
      if (request.allowBookmarks) bookmark();
    };
    this.bookmarkers.add(emitBookmark);
    const interval = setInterval(emitBookmark, this.bookmarkIntervalMs);
    interval.unref();
    let timeout: NodeJS.Timeout | undefined;
    const close = () => {
      if (closed) return;
      closed = true;
      unsubscribe();
      this.bookmarkers.delete(emitBookmark);
      clearInterval(interval);
      if (timeout !== undefined) clearTimeout(timeout);
      response.end();
    };
    if (request.timeoutSeconds !== undefined && request.timeoutSeconds > 0) {
      timeout = setTimeout(close, request.timeoutSeconds * 1000);
      timeout.unref();
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
