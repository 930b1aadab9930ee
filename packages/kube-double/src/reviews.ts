// The request-shaped APIs: TokenRequest (serviceaccounts/<name>/token), TokenReview,
// SelfSubjectAccessReview, SubjectAccessReview and SelfSubjectReview. They are created, answered and
// never stored.
import { rfc3339 } from './clock.js';
import type { ApiContext } from './behaviours.js';
import { isRecord, type KubeObject } from './objects.js';
import type { RbacAuthorizer, RequestAttributes } from './rbac.js';
import {
  MIN_EXPIRATION_SECONDS,
  type BoundObject,
  type UserInfo,
} from './service-account-tokens.js';
import { badRequest, conflict, invalid, KubeApiError, notFound } from './status.js';

const MAX_EXPIRATION_SECONDS = 2 ** 32;
const DEFAULT_EXPIRATION_SECONDS = 3600;

interface TokenRequestSpec {
  audiences?: string[];
  expirationSeconds?: number;
  boundObjectRef?: { kind?: string; apiVersion?: string; name?: string; uid?: string } | null;
}

export function createTokenRequest(
  context: ApiContext,
  namespace: string,
  serviceAccountName: string,
  body: KubeObject,
): KubeObject {
  const serviceAccount = context.store.mustGet(
    context.type('', 'serviceaccounts'),
    namespace,
    serviceAccountName,
  );
  const spec = (isRecord(body.spec) ? body.spec : {}) as TokenRequestSpec;
  const audiences =
    spec.audiences && spec.audiences.length > 0 ? spec.audiences : context.tokens.apiAudiences;
  const expirationSeconds = spec.expirationSeconds ?? DEFAULT_EXPIRATION_SECONDS;
  const invalidToken = (message: string) =>
    invalid('TokenRequest', 'authentication.k8s.io', serviceAccountName, [
      {
        field: 'spec.expirationSeconds',
        reason: 'FieldValueInvalid',
        message: `Invalid value: ${expirationSeconds}: ${message}`,
      },
    ]);
  if (expirationSeconds < MIN_EXPIRATION_SECONDS)
    throw invalidToken('may not specify a duration less than 10 minutes');
  if (expirationSeconds > MAX_EXPIRATION_SECONDS)
    throw invalidToken('may not specify a duration larger than 2^32 seconds');

  let bound: BoundObject | undefined;
  let node: { name: string; uid: string } | undefined;
  const ref = spec.boundObjectRef;
  if (ref) {
    const kinds: Record<string, string> = { Pod: 'pods', Secret: 'secrets', Node: 'nodes' };
    const resource = ref.kind === undefined ? undefined : kinds[ref.kind];
    if (resource === undefined || (ref.apiVersion ?? 'v1') !== 'v1') {
      throw badRequest(
        `cannot bind token to object of type ${ref.apiVersion ?? ''}.${ref.kind ?? ''}`,
      );
    }
    const type = context.type('', resource);
    const target = context.store.get(type, type.namespaced ? namespace : undefined, ref.name ?? '');
    if (target === undefined) throw notFound(type, ref.name ?? '');
    if (ref.uid !== undefined && ref.uid !== '' && ref.uid !== target.metadata.uid) {
      throw conflict(
        type,
        ref.name ?? '',
        `the UID in the bound object reference (${ref.uid}) does not match the UID in record. The object might have been deleted and then recreated`,
      );
    }
    if (ref.kind === 'Pod') {
      const podAccount = (target.spec as { serviceAccountName?: string } | undefined)
        ?.serviceAccountName;
      if (podAccount !== serviceAccountName) {
        throw badRequest(
          `cannot bind token for serviceaccount "${serviceAccountName}" to pod running with different serviceaccount name.`,
        );
      }
      const nodeName = (target.spec as { nodeName?: string } | undefined)?.nodeName;
      if (nodeName !== undefined) {
        const nodeObject = context.store.get(context.type('', 'nodes'), undefined, nodeName);
        if (nodeObject !== undefined) node = { name: nodeName, uid: nodeObject.metadata.uid ?? '' };
      }
    }
    bound = {
      kind: ref.kind as BoundObject['kind'],
      name: ref.name ?? '',
      uid: target.metadata.uid ?? '',
    };
  }
  const issued = context.tokens.issue({
    namespace,
    serviceAccount,
    audiences,
    expirationSeconds,
    bound,
    node,
  });
  const responseSpec: Record<string, unknown> = { audiences, expirationSeconds };
  responseSpec.boundObjectRef = bound
    ? { kind: bound.kind, apiVersion: 'v1', name: bound.name, uid: bound.uid }
    : null;
  return {
    kind: 'TokenRequest',
    apiVersion: 'authentication.k8s.io/v1',
    metadata: {
      name: serviceAccountName,
      namespace,
      creationTimestamp: rfc3339(context.clock.now()),
    },
    spec: responseSpec,
    status: { token: issued.token, expirationTimestamp: rfc3339(issued.claims.exp * 1000) },
  };
}

/** A TokenReview answered by every authenticator the double has (static tokens, then ours). */
export function reviewToken(
  body: KubeObject,
  authenticateStatic: (token: string) => UserInfo | undefined,
  context: ApiContext,
): KubeObject {
  const spec = (isRecord(body.spec) ? body.spec : {}) as { token?: string; audiences?: string[] };
  const token = spec.token ?? '';
  if (token === '') throw badRequest('token is required for TokenReview in authentication');
  const audiences = spec.audiences ?? [];
  const status: Record<string, unknown> = { user: {} };
  const staticUser = authenticateStatic(token);
  if (staticUser !== undefined) {
    // Static tokens are audience-agnostic: they are good for whatever audiences were asked for.
    status.authenticated = true;
    status.user = staticUser;
    if (audiences.length > 0) status.audiences = audiences;
  } else {
    const result = context.tokens.review(token, audiences);
    if (result.authenticated) {
      status.authenticated = true;
      status.user = result.user;
      status.audiences = result.audiences;
    } else if (result.error !== undefined) {
      status.error = result.error;
    }
  }
  return {
    kind: 'TokenReview',
    apiVersion: 'authentication.k8s.io/v1',
    metadata: { creationTimestamp: null } as unknown as KubeObject['metadata'],
    spec: { token, ...(spec.audiences ? { audiences: spec.audiences } : {}) },
    status,
  };
}

interface AccessReviewSpec {
  resourceAttributes?: {
    namespace?: string;
    verb?: string;
    group?: string;
    resource?: string;
    subresource?: string;
    name?: string;
  };
  nonResourceAttributes?: { path?: string; verb?: string };
  user?: string;
  groups?: string[];
  uid?: string;
  extra?: Record<string, string[]>;
}

export function reviewAccess(
  kind: 'SelfSubjectAccessReview' | 'SubjectAccessReview',
  body: KubeObject,
  requester: UserInfo,
  authorizer: RbacAuthorizer,
): KubeObject {
  const spec = (isRecord(body.spec) ? body.spec : {}) as AccessReviewSpec;
  const user: UserInfo =
    kind === 'SelfSubjectAccessReview'
      ? requester
      : { username: spec.user ?? '', groups: spec.groups ?? [], uid: spec.uid, extra: spec.extra };
  if (spec.resourceAttributes === undefined && spec.nonResourceAttributes === undefined) {
    throw new KubeApiError(
      422,
      'Invalid',
      `${kind}.authorization.k8s.io "" is invalid: spec.resourceAttributes: Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes must be specified`,
    );
  }
  const resource = spec.resourceAttributes;
  const attributes: RequestAttributes = resource
    ? {
        user,
        verb: resource.verb ?? '',
        resourceRequest: true,
        apiGroup: resource.group ?? '',
        resource: resource.resource ?? '',
        subresource: resource.subresource ?? '',
        namespace: resource.namespace ?? '',
        name: resource.name ?? '',
        path: '',
      }
    : {
        user,
        verb: spec.nonResourceAttributes?.verb ?? '',
        resourceRequest: false,
        apiGroup: '',
        resource: '',
        subresource: '',
        namespace: '',
        name: '',
        path: spec.nonResourceAttributes?.path ?? '',
      };
  const allowed = authorizer.authorize(attributes);
  return {
    kind,
    apiVersion: 'authorization.k8s.io/v1',
    metadata: { creationTimestamp: null } as unknown as KubeObject['metadata'],
    spec,
    status: allowed
      ? { allowed: true, reason: 'allowed by the RBAC rules bound to the subject' }
      : { allowed: false },
  };
}

export function reviewSelf(user: UserInfo): KubeObject {
  return {
    kind: 'SelfSubjectReview',
    apiVersion: 'authentication.k8s.io/v1',
    metadata: { creationTimestamp: null } as unknown as KubeObject['metadata'],
    status: { userInfo: user },
  };
}
