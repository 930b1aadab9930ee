import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiHarness, type ApiHarness } from '../../support/api-harness.js';

type Doc = { paths: Record<string, Record<string, unknown>> };

/**
 * The web app's reply types are generated (packages/ui/scripts/api-types.mjs) from a checked-in
 * snapshot of the OpenAPI document; this keeps the snapshot true. Every operation in it must be
 * exactly what the server documents now (routes added since are fine; the app does not use
 * them). If it fails: start a server and run `npm run -w @leoflow/ui api:types -- <url>`.
 */
describe('the web app API snapshot', () => {
  let h: ApiHarness;
  let live: Doc;
  beforeAll(async () => {
    h = await createApiHarness('sqlite');
    live = (await h.request(null, 'GET', '/api/v1/openapi.json')).json as unknown as Doc;
  });
  afterAll(() => h.close());

  it('every operation of packages/ui/openapi.json is the one the server documents', () => {
    const file = join(import.meta.dirname, '../../../../ui/openapi.json');
    const snapshot = JSON.parse(readFileSync(file, 'utf8')) as Doc;
    expect(Object.keys(snapshot.paths).length).toBeGreaterThan(10);
    for (const [path, ops] of Object.entries(snapshot.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        expect(live.paths[path]?.[method], `${method.toUpperCase()} ${path}`).toEqual(op);
      }
    }
  });
});
