// metav1.Status failures, shaped as the apiserver returns them (kind/apiVersion/metadata/status/
// message/reason/details/code), so clients that switch on reason (kubectl, client-node) behave as
// they would against a cluster.
import { qualifiedResource, type ResourceType } from './resources.js';

export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  uid?: string;
  causes?: { reason?: string; message?: string; field?: string }[];
  retryAfterSeconds?: number;
}

export interface StatusObject {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Failure' | 'Success';
  message?: string;
  reason?: string;
  details?: StatusDetails;
  code: number;
}

/** A request the double refuses; the router turns it into the Status body and HTTP code. */
export class KubeApiError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly details?: StatusDetails,
  ) {
    super(message);
  }

  toStatus(): StatusObject {
    const status: StatusObject = {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: this.message,
      reason: this.reason,
      code: this.code,
    };
    if (this.details !== undefined) status.details = this.details;
    return status;
  }
}

type TypeRef = Pick<ResourceType, 'group' | 'resource'>;

function details(type: TypeRef, name?: string): StatusDetails {
  const result: StatusDetails = {};
  if (name !== undefined && name !== '') result.name = name;
  if (type.group !== '') result.group = type.group;
  result.kind = type.resource;
  return result;
}

export function notFound(type: TypeRef, name: string): KubeApiError {
  return new KubeApiError(
    404,
    'NotFound',
    `${qualifiedResource(type)} "${name}" not found`,
    details(type, name),
  );
}

export function alreadyExists(type: TypeRef, name: string): KubeApiError {
  return new KubeApiError(
    409,
    'AlreadyExists',
    `${qualifiedResource(type)} "${name}" already exists`,
    details(type, name),
  );
}

export function conflict(type: TypeRef, name: string, why: string): KubeApiError {
  return new KubeApiError(
    409,
    'Conflict',
    `Operation cannot be fulfilled on ${qualifiedResource(type)} "${name}": ${why}`,
    details(type, name),
  );
}

export function staleUpdate(type: TypeRef, name: string): KubeApiError {
  return conflict(
    type,
    name,
    'the object has been modified; please apply your changes to the latest version and try again',
  );
}

export interface FieldError {
  field: string;
  /** FieldValueRequired, FieldValueInvalid, FieldValueForbidden, ... */
  reason: string;
  message: string;
}

/** 422 Invalid: `Kind "name" is invalid: field: message`. */
export function invalid(
  kind: string,
  group: string,
  name: string,
  errors: FieldError[],
): KubeApiError {
  const qualifiedKind = group === '' ? kind : `${kind}.${group}`;
  const summary = errors.map((error) => `${error.field}: ${error.message}`).join(', ');
  const listed = errors.length > 1 ? `[${summary}]` : summary;
  const result: StatusDetails = { name, kind };
  if (group !== '') result.group = group;
  result.causes = errors.map((error) => ({
    reason: error.reason,
    message: error.message,
    field: error.field,
  }));
  return new KubeApiError(
    422,
    'Invalid',
    `${qualifiedKind} "${name}" is invalid: ${listed}`,
    result,
  );
}

export function badRequest(message: string): KubeApiError {
  return new KubeApiError(400, 'BadRequest', message);
}

export function forbidden(type: TypeRef, name: string | undefined, why: string): KubeApiError {
  const subject = name ? `${qualifiedResource(type)} "${name}"` : qualifiedResource(type);
  return new KubeApiError(403, 'Forbidden', `${subject} is forbidden: ${why}`, details(type, name));
}

export function unauthorized(): KubeApiError {
  return new KubeApiError(401, 'Unauthorized', 'Unauthorized');
}

export function methodNotAllowed(): KubeApiError {
  return new KubeApiError(
    405,
    'MethodNotAllowed',
    'the server does not allow this method on the requested resource',
  );
}

export function pageNotFound(path: string): KubeApiError {
  return new KubeApiError(404, 'NotFound', `the server could not find the requested resource`, {
    causes: [{ reason: 'UnexpectedServerResponse', message: `404 page not found: ${path}` }],
  });
}

export function gone(message: string): KubeApiError {
  return new KubeApiError(410, 'Expired', message);
}

export function unsupportedMediaType(contentType: string): KubeApiError {
  return new KubeApiError(
    415,
    'UnsupportedMediaType',
    `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got ${contentType})`,
  );
}

export function success(type: TypeRef, name: string, uid?: string): StatusObject {
  const result = details(type, name);
  if (uid !== undefined) result.uid = uid;
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Success',
    details: result,
    code: 200,
  };
}
