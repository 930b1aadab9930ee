import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  checkConnectionStructure,
  compileDagYaml,
  parseAirflowConnectionsExport,
} from '@leoflow/core';
import {
  gcpUri,
  json,
  makeServiceAccountKey,
  startFake,
  startFakeMetadata,
  startFakeTokenEndpoint,
  verifiedAssertion,
  type Fake,
} from './support/fakes.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const dagDir = join(root, 'examples/dags/gcs_list');
const script = join(dagDir, 'list_bucket.mjs');

let metadata: Fake;
let tokens: Fake;
let storage: Fake;
let home: string;

beforeAll(async () => {
  // The script imports @leoflow/sdk the way a task does: through its built dist/.
  execFileSync(
    process.execPath,
    [join(root, 'node_modules/typescript/bin/tsc'), '-b', join(root, 'packages/sdk')],
    {
      cwd: root,
    },
  );
  metadata = await startFakeMetadata('adc-project');
  tokens = await startFakeTokenEndpoint();
  storage = await startFake((req, _body, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname !== '/storage/v1/b/my-bucket/o')
      return json(res, 404, { error: { code: 404 } });
    if (!/^Bearer (meta-token|sa-token)$/.test(req.headers.authorization ?? ''))
      return json(res, 401, {});
    if (url.searchParams.get('pageToken') === 'p2')
      return json(res, 200, { items: [{ name: 'c.csv' }] });
    json(res, 200, { items: [{ name: 'a.csv' }, { name: 'b/d.csv' }], nextPageToken: 'p2' });
  });
  home = mkdtempSync(join(tmpdir(), 'leoflow-example-home-'));
});

afterAll(async () => {
  await Promise.all([metadata.close(), tokens.close(), storage.close()]);
});

function runTask(conn: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: home,
    AIRFLOW_CONN_GCP_DEFAULT: conn,
    LEOFLOW_PARAMS: JSON.stringify({ bucket: 'my-bucket' }),
    GCE_METADATA_HOST: metadata.url.replace('http://', ''),
    STORAGE_EMULATOR_HOST: storage.url,
  };
  return new Promise((done) => {
    execFile(
      process.execPath,
      [script],
      { cwd: dagDir, env, timeout: 60_000 },
      (err, stdout, stderr) =>
        done({ code: err === null ? 0 : ((err as { code?: number }).code ?? 1), stdout, stderr }),
    );
  });
}

function lastLine(stdout: string): unknown {
  const lines = stdout.split('\n').filter((l) => l !== '');
  return JSON.parse(lines[lines.length - 1]!);
}

describe('examples/dags/gcs_list runs end to end against local fakes', () => {
  it('keyless (ADC via the fake metadata server): lists every page and pushes the names as XCom', async () => {
    storage.requests.length = 0;
    const r = await runTask(gcpUri({ project: 'example-project' }));
    expect(r.stderr).toContain('project: example-project');
    expect(r.code).toBe(0);
    expect(lastLine(r.stdout)).toEqual({
      bucket: 'my-bucket',
      count: 3,
      objects: ['a.csv', 'b/d.csv', 'c.csv'],
    });
    expect(storage.requests.map((q) => q.headers.authorization)).toEqual([
      'Bearer meta-token',
      'Bearer meta-token',
    ]);
  });

  it('key_path: the same script signs with the mounted key and requests the connection scopes', async () => {
    storage.requests.length = 0;
    tokens.requests.length = 0;
    const key = makeServiceAccountKey(`${tokens.url}/token`);
    const keyPath = join(home, 'sa.json');
    writeFileSync(keyPath, JSON.stringify(key.keyJson), { mode: 0o600 });
    const r = await runTask(
      gcpUri({ key_path: keyPath, scopes: 'https://www.googleapis.com/auth/devstorage.read_only' }),
    );
    expect(r.code).toBe(0);
    expect((lastLine(r.stdout) as { count: number }).count).toBe(3);
    expect(tokens.requests).toHaveLength(1);
    expect(verifiedAssertion(tokens.requests[0]!.body, key.publicKey).payload['scope']).toBe(
      'https://www.googleapis.com/auth/devstorage.read_only',
    );
    expect(storage.requests[0]!.headers.authorization).toBe('Bearer sa-token');
  });

  it('the DAG compiles and declares gcp_default; the seeded gcp_default is keyless and structurally valid', () => {
    const compiled = compileDagYaml({
      text: readFileSync(join(dagDir, 'leoflow.yaml'), 'utf8'),
      fileName: 'leoflow.yaml',
      dirName: basename(dagDir),
      readScript: (rel) => (rel === 'list_bucket.mjs' ? readFileSync(script, 'utf8') : undefined),
    });
    expect(compiled.ok).toBe(true);
    expect(JSON.stringify(compiled)).toContain('gcp_default');
    const seeded = parseAirflowConnectionsExport(
      readFileSync(join(root, 'examples/vault/connections.json'), 'utf8'),
      'json',
    );
    const gcp = seeded.find((c) => c.id === 'gcp_default');
    expect(gcp?.conn.conn_type).toBe('google_cloud_platform');
    expect(gcp?.conn.extra).toEqual({ project: 'example-project' });
    expect(checkConnectionStructure(gcp!.conn).ok).toBe(true);
  });
});
