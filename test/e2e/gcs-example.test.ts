import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  json,
  startFake,
  startFakeMetadata,
  type Fake,
} from '../../packages/sdk/test/support/fakes.js';
import {
  api,
  cli,
  REPO,
  scratchDir,
  startStandalone,
  type Standalone,
} from '../support/processes.js';

/**
 * The gcs_list example end to end under Lite: the seeded keyless gcp_default connection is
 * delivered to the task, which resolves Application Default Credentials against a fake
 * metadata server and lists a bucket on a fake GCS endpoint. No key anywhere.
 */
let scratch: ReturnType<typeof scratchDir>;
let sa: Standalone;
let metadata: Fake;
let storage: Fake;

beforeAll(async () => {
  scratch = scratchDir('leoflow-gcs-');
  metadata = await startFakeMetadata('adc-project');
  storage = await startFake((req, _body, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname !== '/storage/v1/b/example-bucket/o') return json(res, 404, {});
    json(res, 200, { items: [{ name: 'a.csv' }, { name: 'b.csv' }] });
  });
  const dags = join(scratch.dir, 'dags');
  cpSync(join(REPO, 'examples/dags/gcs_list'), join(dags, 'gcs_list'), { recursive: true });
  const yamlFile = join(dags, 'gcs_list', 'leoflow.yaml');
  writeFileSync(
    yamlFile,
    readFileSync(yamlFile, 'utf8').replace(
      '    execution_timeout_seconds: 120',
      `    execution_timeout_seconds: 120\n    env: { GCE_METADATA_HOST: "${metadata.url.replace('http://', '')}", STORAGE_EMULATOR_HOST: "${storage.url}" }`,
    ),
  );
  sa = await startStandalone({
    dataDir: join(scratch.dir, 'data'),
    dagsFolder: dags,
    extraArgs: ['--vault-seed', join(REPO, 'examples/vault'), '--secret-scoping', 'enforce'],
  });
});

afterAll(async () => {
  await sa?.stop();
  await metadata?.close();
  await storage?.close();
  scratch?.cleanup();
});

describe('examples/dags/gcs_list against local fakes', () => {
  it('lists the bucket with keyless credentials resolved in the task', async () => {
    const res = await cli(['runs', 'trigger', 'gcs_list', '--wait', '-o', 'json'], {
      LEOFLOW_URL: sa.url,
      LEOFLOW_TOKEN: sa.token,
    });
    const runId = (JSON.parse(res.stdout) as { run: { run_id: string } }).run.run_id;
    const logs = await cli(['tasks', 'logs', runId, 'list_bucket'], {
      LEOFLOW_URL: sa.url,
      LEOFLOW_TOKEN: sa.token,
    });
    expect(res.code, logs.stdout).toBe(0);
    const xcom = await api<{ xcom: { key: string; value: string }[] }>(
      sa,
      'GET',
      `/api/v1/dags/gcs_list/runs/${runId}/tasks/list_bucket/xcom`,
    );
    expect(JSON.parse(xcom.xcom.find((x) => x.key === 'return_value')!.value)).toEqual({
      bucket: 'example-bucket',
      count: 2,
      objects: ['a.csv', 'b.csv'],
    });
    // The storage call carried the metadata server's token: the task's identity, not a key.
    expect(storage.requests.some((r) => r.headers.authorization === 'Bearer meta-token')).toBe(
      true,
    );
  });
});
