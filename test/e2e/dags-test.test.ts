import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { CLI, cli, scratchDir, startStandalone } from '../support/processes.js';

// `leoflow dags test` (issue 40, item 3): one run of a DAG in the CLI's process against a
// throwaway store, with the real agents, sandbox and credential plane. Its logs stream as the
// tasks run; with -o json stdout is exactly one JSON document; failure exits 1; bad input is
// refused before anything is created.

let scratch: { dir: string; cleanup: () => void };

function dagFolder(name: string, yaml: string): string {
  const dir = join(scratch.dir, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'leoflow.yaml'), yaml);
  return dir;
}

const leftovers = () => readdirSync(tmpdir()).filter((n) => n.startsWith('leoflow-dags-test-'));

beforeAll(() => {
  scratch = scratchDir('lf-dagstest-e2e-');
});
afterAll(() => scratch?.cleanup());

describe('leoflow dags test', () => {
  it('runs every task once, streams their logs to stderr, and prints one JSON document', async () => {
    const dir = dagFolder(
      'pipeline',
      `dag_id: pipeline
tasks:
  - task_id: extract
    command: 'echo "extracting for $LEOFLOW_RUN_CONF"; echo "{\\"rows\\": 3}"'
    do_xcom_push: true
  - task_id: shout
    command: echo "loud"
    depends_on: [extract]
    expand:
      WORD: [a, b]
`,
    );
    const before = leftovers().length;
    const r = await cli([
      'dags',
      'test',
      join(dir, 'leoflow.yaml'),
      '--conf',
      '{"day": "2026-01-02"}',
      '--logical-date',
      '2026-01-02',
      '-o',
      'json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const doc = JSON.parse(r.stdout) as {
      run_id: string;
      state: string;
      task_instances: Record<string, unknown>[];
    };
    expect(doc.state).toBe('success');
    expect(doc.run_id).toMatch(/^manual__/);
    expect(doc.task_instances).toEqual([
      {
        task_id: 'extract',
        map_index: -1,
        state: 'success',
        try_number: 1,
        xcom_return: expect.stringContaining('rows') as unknown,
      },
      { task_id: 'shout', map_index: 0, state: 'success', try_number: 1, xcom_return: null },
      { task_id: 'shout', map_index: 1, state: 'success', try_number: 1, xcom_return: null },
    ]);
    expect(r.stderr).toContain('[extract] extracting for {"day":"2026-01-02"}');
    expect(r.stderr).toContain('[shout[1]] loud');
    expect(leftovers().length).toBe(before);
  }, 120_000);

  it('exits 1 when a task fails, with Airflow state names for the rest', async () => {
    const dir = dagFolder(
      'failing',
      `dag_id: failing
tasks:
  - task_id: boom
    command: echo "about to fail"; exit 3
  - task_id: after
    command: echo never
    depends_on: [boom]
`,
    );
    const r = await cli(['dags', 'test', dir]);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('[boom] about to fail');
    expect(r.stdout).toMatch(/boom\s+failed/);
    expect(r.stdout).toMatch(/after\s+upstream_failed/);
    expect(r.stderr).toContain('the test run of failing ended failed');
  }, 120_000);

  it('delivers a declared variable from --vault-seed, masked in the log; without a vault it is refused at file:line:col', async () => {
    const seed = join(scratch.dir, 'seed');
    mkdirSync(seed, { recursive: true });
    writeFileSync(join(seed, 'variables.json'), JSON.stringify({ api_key: 's3cr3t-value-42' }));
    const dir = dagFolder(
      'secretive',
      `dag_id: secretive
variables:
  - api_key
tasks:
  - task_id: use
    command: echo "key is $AIRFLOW_VAR_API_KEY"
`,
    );
    const ok = await cli(['dags', 'test', dir, '--vault-seed', seed]);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toContain('[use] key is ***');
    expect(ok.stdout).not.toContain('s3cr3t-value-42');
    const refused = await cli(['dags', 'test', dir]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('leoflow.yaml:3:5 LF_DAG_UNKNOWN_DECLARATION');
    expect(refused.stderr).toContain('--vault-seed');
  }, 120_000);

  it('refuses bad input before anything starts (exit 2, nothing created)', async () => {
    const dir = dagFolder('fine', 'dag_id: fine\ntasks:\n  - task_id: a\n    command: echo a\n');
    const before = leftovers().length;
    for (const [args, text] of [
      [['--conf', '[1,2]'], '--conf must be a JSON object'],
      [['--logical-date', 'yesterday'], '--logical-date must be an ISO 8601'],
      [['--vault-seed', dir, '--data-dir', dir], 'not both'],
      [['--vault-seed', join(dir, 'nope')], 'is not a folder'],
    ] as const) {
      const r = await cli(['dags', 'test', dir, ...args]);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toContain(text);
    }
    const missing = await cli(['dags', 'test', join(dir, 'missing')]);
    expect(missing.code).toBe(2);
    const broken = dagFolder('broken', 'dag_id: broken\ntasks:\n  - task_id: a\n');
    const b = await cli(['dags', 'test', broken, '-o', 'json']);
    expect(b.code).toBe(1);
    expect(JSON.parse(b.stdout)).toMatchObject({ ok: false });
    expect(leftovers().length).toBe(before);
  }, 60_000);

  it('Ctrl-C stops the run and leaves nothing behind', async () => {
    const dir = dagFolder(
      'slow',
      'dag_id: slow\ntasks:\n  - task_id: nap\n    command: echo napping; sleep 60\n',
    );
    const before = leftovers().length;
    const p = spawn(process.execPath, [CLI, 'dags', 'test', dir], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    p.stdout.on('data', (b: Buffer) => (out += b.toString()));
    p.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const until = Date.now() + 60_000;
    while (!out.includes('[nap] napping') && Date.now() < until)
      await new Promise((r) => setTimeout(r, 100));
    expect(out).toContain('[nap] napping');
    const started = Date.now();
    p.kill('SIGINT');
    const code = await new Promise<number | null>((r) => p.once('exit', (c) => r(c)));
    expect(code).toBe(1);
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(out).toContain('interrupted');
    expect(leftovers().length).toBe(before);
  }, 120_000);

  it("--data-dir uses a stopped Lite's vault from a copy, and refuses a running one", async () => {
    const dataDir = join(scratch.dir, 'lite');
    const lite = await startStandalone({ dataDir });
    try {
      const set = await cli(['--url', lite.url, 'variables', 'set', 'region', 'eu-west'], {
        LEOFLOW_TOKEN: lite.token,
      });
      expect(set.code).toBe(0);
      const dir = dagFolder(
        'regional',
        'dag_id: regional\nvariables: [region]\ntasks:\n  - task_id: a\n    command: echo "region=$AIRFLOW_VAR_REGION" | rev\n',
      );
      const busy = await cli(['dags', 'test', dir, '--data-dir', dataDir]);
      expect(busy.code).toBe(1);
      expect(busy.stderr).toContain('a running process has its database open');
      await lite.stop();
      const r = await cli(['dags', 'test', dir, '--data-dir', dataDir]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain('[a] tsew-ue=noiger');
      // the original was not written: no DAG "regional" there
      const again = await startStandalone({ dataDir });
      try {
        const list = await cli(['--url', again.url, 'dags', 'list', '-o', 'json'], {
          LEOFLOW_TOKEN: again.token,
        });
        expect(JSON.parse(list.stdout)).toMatchObject({ dags: [] });
      } finally {
        await again.stop();
      }
    } finally {
      await lite.stop();
    }
  }, 180_000);
});
