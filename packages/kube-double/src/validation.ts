// The object-meta validation every create and update passes through: names, label keys and
// values, annotation keys — with the apiserver's field paths and messages, so a pod builder that
// emits an invalid label fails here as it would on a cluster.
import type { KubeObject } from './objects.js';
import type { FieldError } from './status.js';

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;

const SUBDOMAIN_MESSAGE =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_NAME_MESSAGE =
  "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const LABEL_VALUE_MESSAGE =
  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const QUALIFIED_NAME_MESSAGE =
  "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/** Namespaces, services and a few others are DNS labels; most kinds are DNS subdomains. */
const LABEL_NAMED_KINDS = new Set(['Namespace', 'Service']);

function invalidValue(field: string, value: string, message: string): FieldError {
  return { field, reason: 'FieldValueInvalid', message: `Invalid value: "${value}": ${message}` };
}

function qualifiedNameErrors(field: string, key: string): FieldError[] {
  const slash = key.lastIndexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  const errors: FieldError[] = [];
  if (prefix !== undefined && (prefix.length > 253 || !DNS1123_SUBDOMAIN.test(prefix))) {
    errors.push(invalidValue(field, key, `prefix part ${SUBDOMAIN_MESSAGE}`));
  }
  if (name.length === 0 || name.length > 63 || !QUALIFIED_NAME.test(name)) {
    errors.push(
      invalidValue(
        field,
        key,
        name.length > 63 ? 'name part must be no more than 63 characters' : QUALIFIED_NAME_MESSAGE,
      ),
    );
  }
  return errors;
}

export function validateObjectMeta(kind: string, object: KubeObject): FieldError[] {
  const errors: FieldError[] = [];
  const name = object.metadata.name ?? '';
  if (name === '') {
    errors.push({
      field: 'metadata.name',
      reason: 'FieldValueRequired',
      message: 'Required value: name or generateName is required',
    });
  } else if (LABEL_NAMED_KINDS.has(kind)) {
    if (name.length > 63 || !DNS1123_LABEL.test(name)) {
      errors.push(invalidValue('metadata.name', name, LABEL_NAME_MESSAGE));
    }
  } else if (
    kind !== 'ClusterRole' &&
    kind !== 'ClusterRoleBinding' &&
    kind !== 'Role' &&
    kind !== 'RoleBinding'
  ) {
    // RBAC object names are path segments only (they may hold ':'), as the apiserver allows.
    if (name.length > 253 || !DNS1123_SUBDOMAIN.test(name)) {
      errors.push(invalidValue('metadata.name', name, SUBDOMAIN_MESSAGE));
    }
  }
  for (const [key, value] of Object.entries(object.metadata.labels ?? {})) {
    errors.push(...qualifiedNameErrors('metadata.labels', key));
    if (typeof value !== 'string' || value.length > 63 || !LABEL_VALUE.test(value)) {
      errors.push(
        invalidValue(
          'metadata.labels',
          String(value),
          String(value).length > 63 ? 'must be no more than 63 characters' : LABEL_VALUE_MESSAGE,
        ),
      );
    }
  }
  let annotationBytes = 0;
  for (const [key, value] of Object.entries(object.metadata.annotations ?? {})) {
    errors.push(...qualifiedNameErrors('metadata.annotations', key.toLowerCase()));
    annotationBytes += key.length + String(value).length;
  }
  if (annotationBytes > 256 * 1024) {
    errors.push({
      field: 'metadata.annotations',
      reason: 'FieldValueTooLong',
      message: 'Too long: must have at most 262144 bytes',
    });
  }
  return errors;
}
