import { PUBLIC, type RouteAccess } from './route-permissions.js';

export interface DocumentedRoute {
  method: string;
  url: string;
  access: RouteAccess;
  schema: {
    summary?: string;
    params?: JsonSchema;
    querystring?: JsonSchema;
    body?: JsonSchema;
    response?: Record<string, JsonSchema>;
  };
}

type JsonSchema = Record<string, unknown>;

const STATUS_TEXT: Record<string, string> = {
  '200': 'OK',
  '201': 'Created',
  '204': 'No content',
  '400': 'Invalid request (body, query or parameters); details.validation says which',
  '401': 'Missing, invalid, expired or revoked token',
  '403': 'The token is valid but its role does not grant the permission',
  '404': "No such object in the caller's tenant (objects of other tenants are never revealed)",
  '409': 'Conflicts with the current state',
};

/** `/dags/:dag_id` → `/dags/{dag_id}` */
export function openApiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

export function operationId(method: string, url: string): string {
  const parts = url
    .replace(/^\/api\/v1\//, '')
    .split('/')
    .map((p) => (p.startsWith(':') ? `by_${p.slice(1)}` : p.replace(/[^A-Za-z0-9]+/g, '_')));
  return [method.toLowerCase(), ...parts].join('_');
}

/**
 * The OpenAPI 3.1 document, built from the very schemas Fastify validates requests and
 * serializes replies with — so it cannot drift from the code.
 */
export function buildOpenApiDocument(routes: readonly DocumentedRoute[], version: string) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of [...routes].sort((a, b) => a.url.localeCompare(b.url))) {
    const path = openApiPath(r.url);
    const parameters: unknown[] = [];
    const pathNames = [...r.url.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1] as string);
    const paramProps = (r.schema.params?.properties ?? {}) as Record<string, JsonSchema>;
    for (const name of pathNames) {
      parameters.push({
        name,
        in: 'path',
        required: true,
        schema: paramProps[name] ?? { type: 'string' },
      });
    }
    const qs = r.schema.querystring;
    const qRequired = new Set((qs?.required as string[] | undefined) ?? []);
    for (const [name, schema] of Object.entries(
      (qs?.properties ?? {}) as Record<string, JsonSchema>,
    )) {
      parameters.push({ name, in: 'query', required: qRequired.has(name), schema });
    }
    // A route without reply schemas serves a page, not JSON (the docs page).
    const responses: Record<string, unknown> = r.schema.response
      ? {}
      : { '200': { description: 'OK', content: { 'text/html': { schema: { type: 'string' } } } } };
    for (const [status, schema] of Object.entries(r.schema.response ?? {})) {
      if (r.access === PUBLIC && (status === '401' || status === '403')) continue;
      responses[status] = {
        description: STATUS_TEXT[status] ?? status,
        ...(schema.type === 'null' ? {} : { content: { 'application/json': { schema } } }),
      };
    }
    paths[path] ??= {};
    paths[path][r.method.toLowerCase()] = {
      operationId: operationId(r.method, r.url),
      summary: r.schema.summary ?? `${r.method} ${r.url}`,
      tags: [tagOf(r.url)],
      ...(r.access === PUBLIC ? { security: [] } : {}),
      'x-leoflow-permission': r.access,
      ...(parameters.length > 0 ? { parameters } : {}),
      ...(r.schema.body
        ? {
            requestBody: {
              required:
                r.method !== 'POST' ||
                ((r.schema.body.required as string[] | undefined) ?? []).length > 0,
              content: { 'application/json': { schema: r.schema.body } },
            },
          }
        : {}),
      responses,
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Leoflow REST API',
      version,
      description:
        'Every route but health and these docs needs `Authorization: Bearer <token>` ' +
        '(`leoflow auth create-token`). Each operation names the permission it needs in ' +
        '`x-leoflow-permission`. Errors are `{code, message, details}` with a stable code.',
    },
    servers: [{ url: '/' }],
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
    },
    security: [{ bearer: [] }],
    paths,
  };
}

function tagOf(url: string): string {
  const seg = url.replace(/^\/api\/v1\//, '').split('/');
  if (seg[0] === 'dags' && seg.includes('runs')) return 'runs';
  return seg[0] ?? 'api';
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** A readable, dependency-free page over the same document (no CDN on a closed network). */
export function renderDocsPage(doc: ReturnType<typeof buildOpenApiDocument>): string {
  const rows: string[] = [];
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, raw] of Object.entries(ops)) {
      const op = raw as {
        summary: string;
        'x-leoflow-permission': string;
        parameters?: { name: string; in: string; required: boolean }[];
        requestBody?: { content: { 'application/json': { schema: unknown } } };
        responses: Record<string, { content?: Record<string, { schema: unknown }> }>;
      };
      const params = (op.parameters ?? [])
        .map((p) => `<code>${escapeHtml(p.name)}</code> (${p.in}${p.required ? ', required' : ''})`)
        .join(', ');
      const body = op.requestBody
        ? `<details><summary>request body</summary><pre>${escapeHtml(JSON.stringify(op.requestBody.content['application/json'].schema, null, 2))}</pre></details>`
        : '';
      const ok = Object.entries(op.responses).find(([s]) => s.startsWith('2'));
      const okJson = ok?.[1].content?.['application/json'];
      const reply = okJson
        ? `<details><summary>${ok[0]} reply</summary><pre>${escapeHtml(JSON.stringify(okJson.schema, null, 2))}</pre></details>`
        : '';
      rows.push(
        `<tr><td><b>${method.toUpperCase()}</b></td><td><code>${escapeHtml(path)}</code></td>` +
          `<td>${escapeHtml(op.summary)}${params ? `<br>parameters: ${params}` : ''}${body}${reply}</td>` +
          `<td><code>${escapeHtml(op['x-leoflow-permission'])}</code></td></tr>`,
      );
    }
  }
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Leoflow REST API</title>
<style>body{font-family:system-ui,sans-serif;margin:2rem;max-width:80rem}table{border-collapse:collapse;width:100%}
td,th{border-bottom:1px solid #ddd;padding:.4rem;vertical-align:top;text-align:left}pre{background:#f6f6f6;padding:.5rem;overflow:auto}</style>
</head><body><h1>Leoflow REST API ${escapeHtml(doc.info.version)}</h1>
<p>${escapeHtml(doc.info.description)} The machine-readable document is at <a href="/api/v1/openapi.json">/api/v1/openapi.json</a> (OpenAPI 3.1).</p>
<table><thead><tr><th>method</th><th>path</th><th>what</th><th>permission</th></tr></thead><tbody>
${rows.join('\n')}
</tbody></table></body></html>`;
}
