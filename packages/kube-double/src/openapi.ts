// OpenAPI, as far as kubectl needs it. /openapi/v2 is a valid OpenAPI v2 document (protobuf, as
// kubectl asks for it, or JSON) with no definitions: kubectl downloads it to validate kinds whose
// v3 operations lack a PATCH (TokenReview, TokenRequest, …), finds no schema for them and leaves
// their validation to the server, as it does for any kind it has no schema for.
// kubectl (1.27+) checks a server's OpenAPI v3 document
// for the `fieldValidation` query parameter on each kind's PATCH operation and, when it is there,
// leaves schema validation to the server (sending fieldValidation=Strict) instead of downloading
// schemas to validate client-side. The double serves exactly that: per group-version documents
// whose operations carry x-kubernetes-group-version-kind and the fieldValidation parameter, and no
// component schemas (so kubectl apply computes strategic-merge patches from its compiled-in
// types, as it does for any kind it finds no schema for). Schema validation itself is therefore
// the double's own (validation.ts), not the OpenAPI schemas': see the package README.
import { createHash } from 'node:crypto';
import { RESOURCE_TYPES, type ResourceType } from './resources.js';

export interface OpenApiDocuments {
  /** The document at `path` (/openapi/v2, /openapi/v3, /openapi/v3/<group-version>), if served. */
  serve(path: string, accept?: string): unknown;
}

function prefixOf(type: Pick<ResourceType, 'group' | 'version'>): string {
  return type.group === '' ? `api/${type.version}` : `apis/${type.group}/${type.version}`;
}

const QUERY_PARAMETERS = ['dryRun', 'fieldManager', 'fieldValidation', 'force'].map((name) => ({
  name,
  in: 'query',
  schema: { type: name === 'force' ? 'boolean' : 'string', uniqueItems: true },
}));

function operation(type: ResourceType, action: string) {
  return {
    tags: [prefixOf(type).replace(/\//g, '_')],
    operationId: `${action}${type.kind}`,
    parameters: action === 'get' || action === 'list' ? [] : QUERY_PARAMETERS,
    responses: { '200': { description: 'OK' } },
    'x-kubernetes-action': action,
    'x-kubernetes-group-version-kind': {
      group: type.group,
      version: type.version,
      kind: type.kind,
    },
  };
}

function groupVersionDocument(prefix: string) {
  const paths: Record<string, unknown> = {};
  for (const type of RESOURCE_TYPES) {
    if (prefixOf(type) !== prefix) continue;
    const collection = type.namespaced
      ? `/${prefix}/namespaces/{namespace}/${type.resource}`
      : `/${prefix}/${type.resource}`;
    if (type.ephemeral) {
      paths[collection] = { post: operation(type, 'post') };
      continue;
    }
    paths[collection] = { get: operation(type, 'list'), post: operation(type, 'post') };
    paths[`${collection}/{name}`] = {
      get: operation(type, 'get'),
      put: operation(type, 'put'),
      patch: operation(type, 'patch'),
      delete: operation(type, 'delete'),
    };
  }
  return {
    openapi: '3.0.0',
    info: { title: 'Kubernetes', version: 'v1.32.0' },
    paths,
    components: { schemas: {} },
  };
}

/** Protobuf of a gnostic OpenAPIv2 Document: swagger (1) and info (2: title 1, version 2). */
function openApiV2Protobuf(): Buffer {
  const field = (number: number, bytes: Buffer) =>
    Buffer.concat([Buffer.from([(number << 3) | 2, bytes.length]), bytes]);
  const text = (number: number, value: string) => field(number, Buffer.from(value));
  return Buffer.concat([
    text(1, '2.0'),
    field(2, Buffer.concat([text(1, 'Kubernetes'), text(2, 'v1.32.0')])),
  ]);
}

export function servedOpenApi(): OpenApiDocuments {
  const prefixes = [...new Set(RESOURCE_TYPES.map(prefixOf))];
  const documents = new Map(prefixes.map((prefix) => [prefix, groupVersionDocument(prefix)]));
  const root = {
    paths: Object.fromEntries(
      prefixes.map((prefix) => {
        const hash = createHash('sha512')
          .update(JSON.stringify(documents.get(prefix)))
          .digest('hex')
          .slice(0, 128)
          .toUpperCase();
        return [prefix, { serverRelativeURL: `/openapi/v3/${prefix}?hash=${hash}` }];
      }),
    ),
  };
  return {
    serve(path, accept = '') {
      if (path === '/openapi/v2')
        return accept.includes('protobuf')
          ? openApiV2Protobuf()
          : { swagger: '2.0', info: { title: 'Kubernetes', version: 'v1.32.0' }, paths: {} };
      if (path === '/openapi/v3') return root;
      if (path.startsWith('/openapi/v3/')) return documents.get(path.slice('/openapi/v3/'.length));
      return undefined;
    },
  };
}
