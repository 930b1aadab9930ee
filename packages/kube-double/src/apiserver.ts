// The request path of the double: authenticate, resolve the URL into (group, version, resource,
// namespace, name, subresource), authorize with RBAC, then run the generic REST verb with the
// resource's behaviour. Every failure leaves as a metav1.Status.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parse as parseYaml } from 'yaml';
import { rfc3339, type Clock } from './clock.js';
import type { ApiContext, DeleteOptions, ResourceBehaviour } from './behaviours.js';
import { coreVersions, group, groupList, resourceList, SERVER_VERSION } from './discovery.js';
import { namespaceBehaviour, finalizeNamespace } from './namespaces.js';
import { isRecord, type KubeObject, type Pod } from './objects.js';
import { jsonPatch, mergePatch, strategicMergePatch } from './patch.js';
import { podBehaviour } from './pods.js';
import { decodeKubernetesProtobuf, UnsupportedProtobufKind } from './protobuf.js';
import {
  bootstrapPolicy,
  forbiddenReason,
  RbacAuthorizer,
  type RequestAttributes,
} from './rbac.js';
import {
  findResourceType,
  findResourceTypeByKind,
  groupVersion,
  RESOURCE_TYPES,
  type ResourceType,
} from './resources.js';
import { createTokenRequest, reviewAccess, reviewSelf, reviewToken } from './reviews.js';
import {
  assertFieldSelectorSupported,
  parseFieldSelector,
  parseLabelSelector,
} from './selectors.js';
import { ServiceAccountTokens, type UserInfo } from './service-account-tokens.js';
import {
  badRequest,
  conflict,
  forbidden,
  invalid,
  KubeApiError,
  methodNotAllowed,
  notFound,
  pageNotFound,
  success,
  unauthorized,
  unsupportedMediaType,
} from './status.js';
import { ObjectStore, type StoreEvent } from './store.js';
import { toTable, wantsTable, type IncludeObject } from './table.js';
import { validateObjectMeta } from './validation.js';
import { WatchHub } from './watch.js';
import type { OpenApiDocuments } from './openapi.js';

export interface ApiServerOptions {
  clock: Clock;
  adminToken: string;
  /** Extra bearer tokens and the users they stand for (tests acting as a given user). */
  staticTokens?: Record<string, UserInfo>;
  issuer: string;
  apiAudiences: string[];
  bookmarkIntervalMs: number;
  historyLimit?: number;
  caCertificate?: string;
  openapi?: OpenApiDocuments;
}

export const ADMIN_USER: UserInfo = {
  username: 'kube-double-admin',
  groups: ['system:masters', 'system:authenticated'],
};

const ANONYMOUS: UserInfo = { username: 'system:anonymous', groups: ['system:unauthenticated'] };

const BEHAVIOURS: Record<string, ResourceBehaviour> = {
  '/pods': podBehaviour,
  '/namespaces': namespaceBehaviour,
  '/secrets': {
    prepareCreate: foldStringData,
    prepareUpdate: (next) => foldStringData(next),
  },
};

/** A Secret's stringData is write-only: merged into data (base64) and never stored. */
function foldStringData(object: KubeObject): void {
  object.type ??= 'Opaque';
  const stringData = object.stringData;
  if (!isRecord(stringData)) return;
  const data = isRecord(object.data) ? (object.data as Record<string, string>) : {};
  for (const [key, value] of Object.entries(stringData)) {
    data[key] = Buffer.from(String(value)).toString('base64');
  }
  object.data = data;
  delete object.stringData;
}

function behaviourOf(type: ResourceType): ResourceBehaviour {
  return BEHAVIOURS[`${type.group}/${type.resource}`] ?? {};
}

const GENERATE_ALPHABET = 'bcdfghjklmnpqrstvwxz2456789';

interface ResourceRequest {
  type: ResourceType;
  namespace?: string;
  name?: string;
  subresource?: string;
  verb: string;
}

export class KubeApiServer {
  readonly store: ObjectStore;
  readonly tokens: ServiceAccountTokens;
  readonly rbac: RbacAuthorizer;
  readonly watches: WatchHub;
  readonly clock: Clock;
  /** Container logs by node name (each kubelet registers how to read its pods' logs). */
  readonly logSources = new Map<
    string,
    (namespace: string, name: string, container?: string) => string | undefined
  >();

  constructor(private readonly options: ApiServerOptions) {
    this.clock = options.clock;
    this.store = new ObjectStore(options.clock, options.historyLimit);
    this.tokens = new ServiceAccountTokens(
      this.store,
      options.clock,
      options.issuer,
      options.apiAudiences,
    );
    this.rbac = new RbacAuthorizer(this.store);
    this.watches = new WatchHub(this.store, options.bookmarkIntervalMs);
    const system = this.context(ADMIN_USER);
    for (const name of ['default', 'kube-system', 'kube-public', 'kube-node-lease']) {
      this.createObject(this.type('', 'namespaces'), undefined, { metadata: { name } }, system);
    }
    for (const object of bootstrapPolicy()) {
      const type = findResourceTypeByKind(object.apiVersion ?? '', object.kind ?? '');
      if (type !== undefined) this.store.create(type, object);
    }
    this.store.watchFrom(this.store.currentRevision(), (event) => this.afterEvent(event));
  }

  type(groupName: string, resource: string): ResourceType {
    const found = RESOURCE_TYPES.find(
      (type) => type.group === groupName && type.resource === resource,
    );
    if (found === undefined) throw new Error(`resource ${groupName}/${resource} is not registered`);
    return found;
  }

  context(user: UserInfo): ApiContext {
    return {
      store: this.store,
      clock: this.clock,
      tokens: this.tokens,
      user,
      caCertificate: this.options.caCertificate,
      type: (groupName, resource) => this.type(groupName, resource),
    };
  }

  /** Controllers riding on the event stream: namespace finalization, finalizer-released deletes. */
  private afterEvent(event: StoreEvent): void {
    const namespace = event.object.metadata.namespace;
    if (event.type === 'DELETED' && namespace !== undefined) {
      const owner = this.store.get(this.type('', 'namespaces'), undefined, namespace);
      if (owner?.metadata.deletionTimestamp !== undefined) {
        setImmediate(() => finalizeNamespace(this.context(ADMIN_USER), namespace));
      }
    }
  }

  async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    try {
      await this.route(request, response);
    } catch (error) {
      const failure =
        error instanceof KubeApiError
          ? error
          : new KubeApiError(
              500,
              'InternalError',
              `Internal error occurred: ${(error as Error).message}`,
            );
      if (!response.headersSent) this.send(response, failure.code, failure.toStatus());
      else response.end();
    }
  }

  authenticateStatic(token: string): UserInfo | undefined {
    if (token === this.options.adminToken) return ADMIN_USER;
    return this.options.staticTokens?.[token];
  }

  private authenticate(request: IncomingMessage): UserInfo {
    const header = request.headers.authorization;
    let user: UserInfo;
    if (header === undefined || header === '') user = ANONYMOUS;
    else {
      const match = /^Bearer\s+(.+)$/i.exec(header);
      if (!match) throw unauthorized();
      const token = (match[1] ?? '').trim();
      const found = this.authenticateStatic(token);
      if (found !== undefined) user = found;
      else {
        const reviewed = this.tokens.review(token);
        if (!reviewed.authenticated) throw unauthorized();
        user = reviewed.user;
      }
    }
    const impersonateUser = request.headers['impersonate-user'];
    if (typeof impersonateUser === 'string' && impersonateUser !== '') {
      if (!user.groups.includes('system:masters')) {
        throw new KubeApiError(
          403,
          'Forbidden',
          `users "${impersonateUser}" is forbidden: User "${user.username}" cannot impersonate resource "users" in API group "" at the cluster scope`,
          { name: impersonateUser, kind: 'users' },
        );
      }
      const raw = request.headers['impersonate-group'];
      const groups = raw === undefined ? [] : Array.isArray(raw) ? raw : [raw];
      user = { username: impersonateUser, groups: [...groups, 'system:authenticated'] };
    }
    return user;
  }

  private authorizeOrThrow(attributes: RequestAttributes, type?: ResourceType): void {
    if (this.rbac.authorize(attributes)) return;
    if (type === undefined) {
      throw new KubeApiError(403, 'Forbidden', `forbidden: ${forbiddenReason(attributes)}`);
    }
    throw forbidden(type, attributes.name || undefined, forbiddenReason(attributes));
  }

  private nonResource(user: UserInfo, path: string): void {
    this.authorizeOrThrow({
      user,
      verb: 'get',
      resourceRequest: false,
      apiGroup: '',
      resource: '',
      subresource: '',
      namespace: '',
      name: '',
      path,
    });
  }

  private async route(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(request.url ?? '/', 'http://kube-double');
    const path = url.pathname.length > 1 ? url.pathname.replace(/\/+$/, '') : url.pathname;
    const method = request.method ?? 'GET';
    const user = this.authenticate(request);
    const segments = path.split('/').filter((segment) => segment !== '');

    const nonResource = this.nonResourceDocument(path, segments, request);
    if (nonResource !== undefined) {
      if (method !== 'GET') throw methodNotAllowed();
      this.nonResource(user, path);
      if (Buffer.isBuffer(nonResource)) {
        response.writeHead(200, {
          'Content-Type': 'application/com.github.proto-openapi.spec.v2.v1.0+protobuf',
        });
        response.end(nonResource);
      } else if (typeof nonResource === 'string') {
        response.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8' });
        response.end(nonResource);
      } else this.send(response, 200, nonResource);
      return;
    }

    const parsed = this.parseResourcePath(segments, method, url.searchParams);
    if (parsed === undefined) {
      this.nonResource(user, path);
      throw pageNotFound(path);
    }
    const { type, namespace, name, subresource, verb } = parsed;
    this.authorizeOrThrow(
      {
        user,
        verb,
        resourceRequest: true,
        apiGroup: type.group,
        resource: type.resource,
        subresource: subresource ?? '',
        namespace: type.resource === 'namespaces' ? (name ?? '') : (namespace ?? ''),
        name: name ?? '',
        path,
      },
      type,
    );
    const context = this.context(user);
    const query = url.searchParams;
    const dryRun = query.getAll('dryRun').includes('All');

    switch (verb) {
      case 'list':
        this.send(response, 200, this.listObjects(type, namespace, query, request.headers.accept));
        return;
      case 'watch':
        this.watchObjects(type, namespace, query, request.headers.accept, response);
        return;
      case 'get': {
        const object = this.store.mustGet(type, namespace, name ?? '');
        if (subresource === 'log') {
          const nodeName = (object as Pod).spec.nodeName ?? '';
          const text = this.logSources.get(nodeName)?.(
            namespace ?? '',
            name ?? '',
            query.get('container') ?? undefined,
          );
          if (text === undefined) {
            throw badRequest(
              `container in pod "${name ?? ''}" is waiting to start: ContainerCreating`,
            );
          }
          response.writeHead(200, { 'Content-Type': 'text/plain' });
          response.end(text);
          return;
        }
        this.send(response, 200, this.renderOne(type, object, request.headers.accept, query));
        return;
      }
      case 'create': {
        const body = await readBody(request);
        if (subresource !== undefined) {
          this.send(
            response,
            201,
            this.createSubresource(type, namespace, name ?? '', subresource, body, context),
          );
          return;
        }
        if (type.ephemeral) {
          this.send(response, 201, this.review(type, body, user));
          return;
        }
        this.send(response, 201, this.createObject(type, namespace, body, context, dryRun));
        return;
      }
      case 'update': {
        const body = await readBody(request);
        this.send(
          response,
          200,
          this.updateObject(type, namespace, name ?? '', subresource, body, context, dryRun),
        );
        return;
      }
      case 'patch': {
        const raw = await readRaw(request);
        const contentType = (request.headers['content-type'] ?? '').split(';')[0]?.trim() ?? '';
        const { object, created } = this.patchObject(
          type,
          namespace,
          name ?? '',
          subresource,
          raw,
          contentType,
          context,
          dryRun,
        );
        this.send(response, created ? 201 : 200, object);
        return;
      }
      case 'delete': {
        const raw = await readRaw(request);
        const options = deleteOptions(raw, query);
        const { body, pending } = this.deleteObject(type, namespace, name ?? '', options, context);
        this.send(response, pending ? 202 : 200, body);
        return;
      }
      case 'deletecollection': {
        const raw = await readRaw(request);
        const options = deleteOptions(raw, query);
        const matches = this.selector(type, query);
        const deleted: KubeObject[] = [];
        for (const object of this.store.list(type, namespace)) {
          if (!matches(object)) continue;
          const { body } = this.deleteObject(
            type,
            object.metadata.namespace,
            object.metadata.name ?? '',
            options,
            context,
          );
          if (isRecord(body) && body.kind !== 'Status') deleted.push(body as KubeObject);
        }
        this.send(response, 200, this.listDocument(type, deleted, {}));
        return;
      }
      default:
        throw methodNotAllowed();
    }
  }

  private nonResourceDocument(path: string, segments: string[], request: IncomingMessage): unknown {
    if (path === '/version') return SERVER_VERSION;
    if (path === '/healthz' || path === '/livez' || path === '/readyz') return 'ok';
    if (path === '/api') return coreVersions(request.headers.host ?? '127.0.0.1');
    if (path === '/apis') return groupList();
    if (path === '/api/v1') return resourceList('', 'v1');
    if (segments[0] === 'apis' && segments.length === 2)
      return group(segments[1] ?? '') ?? notFoundDoc(path);
    if (segments[0] === 'apis' && segments.length === 3) {
      return resourceList(segments[1] ?? '', segments[2] ?? '') ?? notFoundDoc(path);
    }
    if (path === '/.well-known/openid-configuration') {
      return {
        issuer: this.tokens.issuer,
        jwks_uri: `${this.tokens.issuer}/openid/v1/jwks`,
        response_types_supported: ['id_token'],
        subject_types_supported: ['public'],
        id_token_signing_alg_values_supported: ['RS256'],
      };
    }
    if (path === '/openid/v1/jwks') return this.tokens.jwks();
    if (segments[0] === 'openapi') {
      const document = this.options.openapi?.serve(path, request.headers.accept ?? '');
      if (document === undefined) throw pageNotFound(path);
      return document;
    }
    return undefined;
  }

  private parseResourcePath(
    segments: string[],
    method: string,
    query: URLSearchParams,
  ): ResourceRequest | undefined {
    let groupName: string;
    let version: string;
    let rest: string[];
    if (segments[0] === 'api' && segments.length >= 3) {
      groupName = '';
      version = segments[1] ?? '';
      rest = segments.slice(2);
    } else if (segments[0] === 'apis' && segments.length >= 4) {
      groupName = segments[1] ?? '';
      version = segments[2] ?? '';
      rest = segments.slice(3);
    } else return undefined;
    let namespace: string | undefined;
    if (rest[0] === 'namespaces' && rest.length >= 3) {
      const candidate = findResourceType(groupName, version, rest[2] ?? '');
      if (candidate?.namespaced) {
        namespace = rest[1];
        rest = rest.slice(2);
      }
    }
    if (rest.length > 3) return undefined;
    const type = findResourceType(groupName, version, rest[0] ?? '');
    if (type === undefined) return undefined;
    const name = rest[1];
    const subresource = rest[2];
    if (subresource !== undefined && type.subresources[subresource] === undefined) return undefined;
    if (type.namespaced && namespace === undefined && !(method === 'GET' && name === undefined))
      return undefined;
    let verb: string;
    switch (method) {
      case 'GET':
        verb =
          name !== undefined
            ? 'get'
            : ['true', '1'].includes(query.get('watch') ?? '')
              ? 'watch'
              : 'list';
        break;
      case 'POST':
        if (name !== undefined && subresource === undefined) throw methodNotAllowed();
        verb = 'create';
        break;
      case 'PUT':
        if (name === undefined) throw methodNotAllowed();
        verb = 'update';
        break;
      case 'PATCH':
        if (name === undefined) throw methodNotAllowed();
        verb = 'patch';
        break;
      case 'DELETE':
        verb = name === undefined ? 'deletecollection' : 'delete';
        break;
      default:
        throw methodNotAllowed();
    }
    if (type.ephemeral && verb !== 'create') throw methodNotAllowed();
    return { type, namespace, name, subresource, verb };
  }

  private selector(type: ResourceType, query: URLSearchParams) {
    const labels = parseLabelSelector(query.get('labelSelector'));
    const fieldText = query.get('fieldSelector');
    assertFieldSelectorSupported(fieldText, type.kind, { metadata: {} });
    const fields = parseFieldSelector(fieldText, type.kind);
    return (object: KubeObject) => labels(object) && fields(object);
  }

  private listDocument(type: ResourceType, items: KubeObject[], meta: Record<string, string>) {
    return {
      kind: `${type.kind}List`,
      apiVersion: groupVersion(type),
      metadata: { resourceVersion: String(this.store.currentRevision()), ...meta },
      items: items.map((item) => {
        const { kind: _kind, apiVersion: _apiVersion, ...rest } = item;
        return rest;
      }),
    };
  }

  private listObjects(
    type: ResourceType,
    namespace: string | undefined,
    query: URLSearchParams,
    accept?: string,
  ) {
    const matches = this.selector(type, query);
    let items = this.store.list(type, namespace).filter(matches);
    const meta: Record<string, string> = {};
    const continueToken = query.get('continue');
    if (continueToken) {
      const start = Number(Buffer.from(continueToken, 'base64url').toString());
      if (!Number.isInteger(start)) throw badRequest('invalid continue token');
      items = items.slice(start);
    }
    const limit = Number(query.get('limit') ?? '0');
    if (limit > 0 && items.length > limit) {
      const offset =
        (continueToken ? Number(Buffer.from(continueToken, 'base64url').toString()) : 0) + limit;
      meta.continue = Buffer.from(String(offset)).toString('base64url');
      meta.remainingItemCount = String(items.length - limit);
      items = items.slice(0, limit);
    }
    if (wantsTable(accept)) {
      return toTable(
        type.kind,
        items,
        String(this.store.currentRevision()),
        this.clock.now(),
        includeObject(query),
        meta,
      );
    }
    const document = this.listDocument(type, items, meta);
    if (meta.remainingItemCount !== undefined) {
      (document.metadata as Record<string, unknown>).remainingItemCount = Number(
        meta.remainingItemCount,
      );
    }
    return document;
  }

  private renderOne(
    type: ResourceType,
    object: KubeObject,
    accept: string | undefined,
    query: URLSearchParams,
  ): unknown {
    if (wantsTable(accept)) {
      return toTable(
        type.kind,
        [object],
        object.metadata.resourceVersion ?? '',
        this.clock.now(),
        includeObject(query),
      );
    }
    return object;
  }

  private watchObjects(
    type: ResourceType,
    namespace: string | undefined,
    query: URLSearchParams,
    accept: string | undefined,
    response: ServerResponse,
  ): void {
    const table = wantsTable(accept);
    const include = includeObject(query);
    const sendInitial = query.get('sendInitialEvents');
    const timeout = query.get('timeoutSeconds');
    this.watches.serve(
      {
        type,
        namespace,
        matches: this.selector(type, query),
        resourceVersion: query.get('resourceVersion') ?? undefined,
        allowBookmarks: query.get('allowWatchBookmarks') === 'true',
        sendInitialEvents: sendInitial === null ? undefined : sendInitial === 'true',
        timeoutSeconds: timeout === null ? undefined : Number(timeout),
        render: (object) =>
          table
            ? toTable(
                type.kind,
                [object],
                object.metadata.resourceVersion ?? '',
                this.clock.now(),
                include,
              )
            : object,
      },
      response,
    );
  }

  createObject(
    type: ResourceType,
    namespace: string | undefined,
    body: unknown,
    context: ApiContext,
    dryRun = false,
  ): KubeObject {
    const object = this.checkBody(type, body);
    if (type.namespaced) {
      const declared = object.metadata.namespace;
      if (declared !== undefined && declared !== '' && declared !== namespace) {
        throw badRequest(
          'the namespace of the provided object does not match the namespace sent on the request',
        );
      }
      object.metadata.namespace = namespace;
      const owner = this.store.get(this.type('', 'namespaces'), undefined, namespace ?? '');
      if (owner === undefined) throw notFound(this.type('', 'namespaces'), namespace ?? '');
      if (owner.metadata.deletionTimestamp !== undefined) {
        throw forbidden(
          type,
          object.metadata.name,
          `unable to create new content in namespace ${namespace ?? ''} because it is being terminated`,
        );
      }
    } else delete object.metadata.namespace;
    if ((object.metadata.name ?? '') === '' && object.metadata.generateName) {
      let suffix = '';
      for (let i = 0; i < 5; i += 1)
        suffix += GENERATE_ALPHABET[Math.floor(Math.random() * GENERATE_ALPHABET.length)];
      object.metadata.name = `${object.metadata.generateName}${suffix}`;
    }
    for (const field of [
      'uid',
      'resourceVersion',
      'creationTimestamp',
      'deletionTimestamp',
      'deletionGracePeriodSeconds',
      'generation',
    ] as const) {
      delete object.metadata[field];
    }
    if (type.subresources.status !== undefined && type.resource !== 'nodes') delete object.status;
    const errors = validateObjectMeta(type.kind, object);
    if (errors.length > 0) throw invalid(type.kind, type.group, object.metadata.name ?? '', errors);
    const behaviour = behaviourOf(type);
    behaviour.prepareCreate?.(object, context);
    if (dryRun) {
      if (this.store.get(type, namespace, object.metadata.name ?? '') !== undefined) {
        this.store.create(type, object); // throws AlreadyExists
      }
      return { ...object, apiVersion: groupVersion(type), kind: type.kind };
    }
    const created = this.store.create(type, object);
    behaviour.afterCreate?.(created, context);
    return created;
  }

  private checkBody(type: ResourceType, body: unknown): KubeObject {
    if (!isRecord(body)) throw badRequest('the request body must be a JSON object');
    const object = structuredClone(body) as KubeObject;
    if (!isRecord(object.metadata)) object.metadata = {};
    if (object.apiVersion !== undefined && object.apiVersion !== groupVersion(type)) {
      throw badRequest(
        `the API version in the data (${String(object.apiVersion)}) does not match the expected API version (${groupVersion(type)})`,
      );
    }
    if (object.kind !== undefined && object.kind !== type.kind) {
      throw badRequest(
        `the kind in the data (${String(object.kind)}) does not match the expected kind (${type.kind})`,
      );
    }
    return object;
  }

  updateObject(
    type: ResourceType,
    namespace: string | undefined,
    name: string,
    subresource: string | undefined,
    body: unknown,
    context: ApiContext,
    dryRun = false,
  ): KubeObject {
    const incoming = this.checkBody(type, body);
    if ((incoming.metadata.name ?? name) !== name) {
      throw badRequest(
        `the name of the object (${incoming.metadata.name ?? ''}) does not match the name on the URL (${name})`,
      );
    }
    const current = this.store.mustGet(type, namespace, name);
    let next: KubeObject;
    if (subresource === 'status') {
      next = { ...current, status: incoming.status };
      next.metadata = {
        ...current.metadata,
        resourceVersion: incoming.metadata.resourceVersion ?? '',
      };
    } else {
      next = incoming;
      next.metadata.name = name;
      next.metadata.namespace = current.metadata.namespace;
      if (type.subresources.status !== undefined && type.resource !== 'namespaces')
        next.status = current.status;
      if (type.resource === 'namespaces') next.status = current.status;
    }
    next.metadata.uid = current.metadata.uid;
    next.metadata.creationTimestamp = current.metadata.creationTimestamp;
    if (current.metadata.deletionTimestamp !== undefined) {
      next.metadata.deletionTimestamp = current.metadata.deletionTimestamp;
      next.metadata.deletionGracePeriodSeconds = current.metadata.deletionGracePeriodSeconds;
    } else {
      delete next.metadata.deletionTimestamp;
      delete next.metadata.deletionGracePeriodSeconds;
    }
    const errors = validateObjectMeta(type.kind, next);
    if (errors.length > 0) throw invalid(type.kind, type.group, name, errors);
    behaviourOf(type).prepareUpdate?.(next, current, context);
    if (type.resource === 'pods' && subresource !== 'status')
      assertPodSpecUnchanged(next as Pod, current as Pod);
    if (dryRun) return next;
    const stored = this.store.update(type, next);
    if (
      stored.metadata.deletionTimestamp !== undefined &&
      (stored.metadata.finalizers ?? []).length === 0 &&
      type.resource !== 'pods' &&
      type.resource !== 'namespaces'
    ) {
      return this.store.remove(type, namespace, name);
    }
    return stored;
  }

  patchObject(
    type: ResourceType,
    namespace: string | undefined,
    name: string,
    subresource: string | undefined,
    raw: string,
    contentType: string,
    context: ApiContext,
    dryRun = false,
  ): { object: KubeObject; created: boolean } {
    let patch: unknown;
    try {
      patch = contentType === 'application/apply-patch+yaml' ? parseYaml(raw) : JSON.parse(raw);
    } catch (error) {
      throw badRequest(`error decoding patch: ${(error as Error).message}`);
    }
    const current = this.store.get(type, namespace, name);
    if (contentType === 'application/apply-patch+yaml') {
      // Server-side apply, approximated: create when absent, else a strategic merge without field
      // ownership (fields dropped from the applied configuration are not removed).
      if (current === undefined) {
        return {
          object: this.createObject(type, namespace, patch, context, dryRun),
          created: true,
        };
      }
      const merged = strategicMergePatch(current, patch) as KubeObject;
      return {
        object: this.updateObject(type, namespace, name, subresource, merged, context, dryRun),
        created: false,
      };
    }
    if (current === undefined) throw notFound(type, name);
    let merged: unknown;
    switch (contentType) {
      case 'application/merge-patch+json':
        merged = mergePatch(current, patch);
        break;
      case 'application/strategic-merge-patch+json':
        merged = strategicMergePatch(current, patch);
        break;
      case 'application/json-patch+json':
        merged = jsonPatch(current, patch);
        break;
      default:
        throw unsupportedMediaType(contentType);
    }
    if (isRecord(merged) && isRecord(merged.metadata)) {
      // The patch carries a resourceVersion only if the client put one there (a precondition).
      const patchedVersion =
        isRecord(patch) && isRecord(patch.metadata) ? patch.metadata.resourceVersion : undefined;
      merged.metadata.resourceVersion = typeof patchedVersion === 'string' ? patchedVersion : '';
    }
    return {
      object: this.updateObject(type, namespace, name, subresource, merged, context, dryRun),
      created: false,
    };
  }

  deleteObject(
    type: ResourceType,
    namespace: string | undefined,
    name: string,
    options: DeleteOptions,
    context: ApiContext,
  ): { body: unknown; pending: boolean } {
    const current = this.store.mustGet(type, namespace, name);
    const preconditions = options.preconditions;
    if (preconditions?.uid !== undefined && preconditions.uid !== current.metadata.uid) {
      throw conflict(
        type,
        name,
        `Precondition failed: UID in precondition: ${preconditions.uid}, UID in object meta: ${current.metadata.uid ?? ''}`,
      );
    }
    if (
      preconditions?.resourceVersion !== undefined &&
      preconditions.resourceVersion !== current.metadata.resourceVersion
    ) {
      throw conflict(
        type,
        name,
        `Precondition failed: ResourceVersion in precondition: ${preconditions.resourceVersion}, ResourceVersion in object meta: ${current.metadata.resourceVersion ?? ''}`,
      );
    }
    if (options.dryRun?.includes('All')) return { body: current, pending: false };
    const behaviour = behaviourOf(type);
    if (behaviour.delete !== undefined) {
      const body = behaviour.delete(current, options, context);
      const pending = this.store.get(type, namespace, name) !== undefined;
      return { body, pending };
    }
    if ((current.metadata.finalizers ?? []).length > 0) {
      if (current.metadata.deletionTimestamp === undefined) {
        current.metadata.deletionTimestamp = rfc3339(this.clock.now());
        current.metadata.deletionGracePeriodSeconds = 0;
        return { body: this.store.update(type, current), pending: true };
      }
      return { body: current, pending: true };
    }
    const removed = this.store.remove(type, namespace, name);
    return { body: success(type, name, removed.metadata.uid), pending: false };
  }

  private createSubresource(
    type: ResourceType,
    namespace: string | undefined,
    name: string,
    subresource: string,
    body: unknown,
    context: ApiContext,
  ): unknown {
    if (type.resource === 'serviceaccounts' && subresource === 'token') {
      return createTokenRequest(
        context,
        namespace ?? '',
        name,
        isRecord(body) ? (body as KubeObject) : { metadata: {} },
      );
    }
    if (type.resource === 'pods' && subresource === 'binding') {
      const target = isRecord(body) && isRecord(body.target) ? body.target : {};
      const pod = this.store.mustGet(type, namespace, name) as Pod;
      if (pod.spec.nodeName !== undefined) {
        throw conflict(
          type,
          name,
          `pod ${name} is already assigned to node "${pod.spec.nodeName}"`,
        );
      }
      this.bindPod(pod, typeof target.name === 'string' ? target.name : '');
      return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', code: 201 };
    }
    throw methodNotAllowed();
  }

  /** Binds a pod to a node (the scheduler's write): spec.nodeName and PodScheduled=True. */
  bindPod(pod: Pod, nodeName: string): Pod {
    pod.spec.nodeName = nodeName;
    const status = pod.status ?? {};
    status.conditions = [
      ...(status.conditions ?? []).filter((condition) => condition.type !== 'PodScheduled'),
      {
        type: 'PodScheduled',
        status: 'True',
        lastProbeTime: null,
        lastTransitionTime: rfc3339(this.clock.now()),
      },
    ];
    pod.status = status;
    pod.metadata.resourceVersion = '';
    return this.store.update(this.type('', 'pods'), pod) as Pod;
  }

  private review(type: ResourceType, body: unknown, user: UserInfo): unknown {
    const object = isRecord(body) ? (body as KubeObject) : { metadata: {} };
    switch (type.kind) {
      case 'TokenReview':
        return reviewToken(object, (token) => this.authenticateStatic(token), this.context(user));
      case 'SelfSubjectAccessReview':
      case 'SubjectAccessReview':
        return reviewAccess(type.kind, object, user, this.rbac);
      case 'SelfSubjectReview':
        return reviewSelf(user);
      default:
        throw methodNotAllowed();
    }
  }

  private send(response: ServerResponse, code: number, body: unknown): void {
    const text = JSON.stringify(body);
    response.writeHead(code, {
      'Content-Type': 'application/json',
      'Content-Length': Buffer.byteLength(text),
      'Cache-Control': 'no-cache, private',
    });
    response.end(text);
  }
}

function notFoundDoc(path: string): never {
  throw pageNotFound(path);
}

function includeObject(query: URLSearchParams): IncludeObject {
  const value = query.get('includeObject');
  return value === 'None' || value === 'Object' ? value : 'Metadata';
}

/** Fields of a pod spec that an update may change; the apiserver forbids any other change. */
function assertPodSpecUnchanged(next: Pod, current: Pod): void {
  const comparable = (pod: Pod) => {
    const spec = structuredClone(pod.spec ?? { containers: [] });
    delete spec.activeDeadlineSeconds;
    delete (spec as { tolerations?: unknown }).tolerations;
    delete spec.terminationGracePeriodSeconds;
    for (const container of [...(spec.containers ?? []), ...(spec.initContainers ?? [])])
      delete container.image;
    return JSON.stringify(spec);
  };
  if (comparable(next) !== comparable(current)) {
    throw invalid('Pod', '', current.metadata.name ?? '', [
      {
        field: 'spec',
        reason: 'FieldValueForbidden',
        message:
          'Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)',
      },
    ]);
  }
}

function deleteOptions(raw: string, query: URLSearchParams): DeleteOptions {
  let options: DeleteOptions = {};
  if (raw.trim() !== '') {
    try {
      options = JSON.parse(raw) as DeleteOptions;
    } catch {
      throw badRequest('the body of a DELETE must be DeleteOptions (JSON)');
    }
  }
  const grace = query.get('gracePeriodSeconds');
  if (grace !== null) options.gracePeriodSeconds = Number(grace);
  const propagation = query.get('propagationPolicy');
  if (propagation !== null) options.propagationPolicy = propagation;
  const dryRun = query.getAll('dryRun');
  if (dryRun.length > 0) options.dryRun = dryRun;
  return options;
}

async function readBytes(request: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

async function readRaw(request: IncomingMessage): Promise<string> {
  const contentType = request.headers['content-type'] ?? '';
  if (contentType.includes('protobuf')) throw unsupportedMediaType(contentType);
  return (await readBytes(request)).toString('utf8');
}

async function readBody(request: IncomingMessage): Promise<unknown> {
  const contentType = request.headers['content-type'] ?? '';
  if (contentType.startsWith('application/vnd.kubernetes.protobuf')) {
    const bytes = await readBytes(request);
    try {
      return decodeKubernetesProtobuf(bytes);
    } catch (error) {
      if (error instanceof UnsupportedProtobufKind)
        throw unsupportedMediaType(`${contentType} (${error.message})`);
      throw badRequest(`error decoding protobuf request body: ${(error as Error).message}`);
    }
  }
  const raw = (await readBytes(request)).toString('utf8');
  if (raw.trim() === '') return {};
  try {
    return /yaml/.test(contentType) ? parseYaml(raw) : JSON.parse(raw);
  } catch (error) {
    throw badRequest(`error decoding request body: ${(error as Error).message}`);
  }
}
