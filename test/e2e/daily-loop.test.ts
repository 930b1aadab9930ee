import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  api,
  cli,
  scratchDir,
  startStandalone,
  type CliResult,
  type Standalone,
} from '../support/processes.js';

// Issue 40, the daily loop of an Airflow user, against a real `leoflow standalone` and the real
// CLI: new DAGs start paused; the DAGs folder is watched (new, changed, broken, fixed, removed),
// what does not load is listed by `dags errors` and counted by `dags list`; `latest` names the
// newest run; `leoflow login` writes a profile the CLI then uses from anywhere.

let scratch: { dir: string; cleanup: () => void };
let lite: Standalone;
let dags: string;
let cliConfig: string;

const as = (args: string[], extra: Record<string, string> = {}): Promise<CliResult> =>
  cli(['--url', lite.url, ...args], { LEOFLOW_TOKEN: lite.token, ...extra });

function writeDag(name: string, body: string): void {
  mkdirSync(join(dags, name), { recursive: true });
  writeFileSync(join(dags, name, 'leoflow.yaml'), body);
}

async function eventually<T>(probe: () => Promise<T | undefined>, ms = 15_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error('not within the time allowed');
    await new Promise((r) => setTimeout(r, 200));
  }
}

interface DagView {
  dag_id: string;
  current_version: number;
  is_paused: boolean;
  is_active: boolean;
}
const listDags = async () => (await api<{ dags: DagView[] }>(lite, 'GET', '/api/v1/dags')).dags;
const dag = async (id: string) => (await listDags()).find((d) => d.dag_id === id);

beforeAll(async () => {
  scratch = scratchDir('leoflow-daily-loop-');
  dags = join(scratch.dir, 'dags');
  cliConfig = join(scratch.dir, 'cli', 'config.yaml');
  const start = new Date(Date.now() - 3600_000).toISOString();
  writeDag(
    'minutely',
    `dag_id: minutely\nschedule: '* * * * *'\nstart_date: '${start}'\ncatchup: false\ntasks:\n  - task_id: tick\n    command: echo tick\n`,
  );
  writeDag(
    'manual',
    'dag_id: manual\nschedule: null\ntasks:\n  - task_id: greet\n    command: echo "hello from $AIRFLOW_CTX_DAG_RUN_ID"\n',
  );
  lite = await startStandalone({ dataDir: join(scratch.dir, 'data'), dagsFolder: dags });
}, 60_000);

afterAll(async () => {
  await lite?.stop();
  scratch?.cleanup();
});

describe('new DAGs start paused (dags.paused_at_creation)', () => {
  it('a scheduled DAG from the folder creates no run until it is unpaused', async () => {
    expect(await dag('minutely')).toMatchObject({ is_paused: true, is_active: true });
    await new Promise((r) => setTimeout(r, 2500));
    const runs = () =>
      api<{ runs: { run_type: string }[] }>(lite, 'GET', '/api/v1/runs?dag_id=minutely');
    expect((await runs()).runs).toEqual([]);
    expect((await as(['dags', 'unpause', 'minutely'])).code).toBe(0);
    await eventually(async () => ((await runs()).runs.length > 0 ? true : undefined));
    expect((await runs()).runs[0]?.run_type).toBe('scheduled');
    expect(lite.output()).toContain('new DAGs     start paused');
  }, 30_000);
});

describe('the watched DAGs folder', () => {
  it('picks up a broken file as an import error (dags errors, dags list, the API), then its fix', async () => {
    writeDag(
      'broken',
      'dag_id: broken\ntasks:\n  - task_id: a\n    command: x\n    depends_on: [a]\n',
    );
    writeDag(
      'undeclared',
      'dag_id: undeclared\nvariables:\n  - missing_var\ntasks:\n  - task_id: a\n    command: x\n',
    );
    const errors = await eventually(async () => {
      const r = await as(['dags', 'errors', '-o', 'json']);
      const doc = JSON.parse(r.stdout) as {
        import_errors: { file: string; diagnostics: unknown[] }[];
      };
      return doc.import_errors.length === 2 ? doc.import_errors : undefined;
    });
    expect(errors.map((e) => e.file)).toEqual(['broken/leoflow.yaml', 'undeclared/leoflow.yaml']);
    expect(errors[1]?.diagnostics).toEqual([
      expect.objectContaining({
        code: 'LF_DAG_UNKNOWN_DECLARATION',
        line: 3,
        column: 5,
        hint: expect.stringContaining('leoflow variables set'),
      }),
    ]);
    const table = await as(['dags', 'errors']);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^broken\/leoflow\.yaml:\d+:\d+ LF_DAG_/m);
    expect(table.stdout).toContain('undeclared/leoflow.yaml:3:5 LF_DAG_UNKNOWN_DECLARATION');
    expect(table.stdout).toContain('hint: ');
    const list = await as(['dags', 'list']);
    expect(list.stderr).toContain('2 DAG file(s) do not load: see `leoflow dags errors`');
    expect(JSON.parse((await as(['dags', 'list', '-o', 'json'])).stdout)).toMatchObject({
      import_errors: 2,
    });
    // defining the variable is not a file change; the next change to the file loads it
    expect((await as(['variables', 'set', 'missing_var', 'v'])).code).toBe(0);
    writeDag('broken', 'dag_id: broken\ntasks:\n  - task_id: a\n    command: echo fixed\n');
    writeDag(
      'undeclared',
      'dag_id: undeclared\nvariables:\n  - missing_var\ntasks:\n  - task_id: a\n    command: echo x\n',
    );
    await eventually(async () =>
      (await dag('broken')) && (await dag('undeclared')) ? true : undefined,
    );
    const after = JSON.parse((await as(['dags', 'errors', '-o', 'json'])).stdout) as {
      import_errors: unknown[];
    };
    expect(after.import_errors).toEqual([]);
    expect((await as(['dags', 'errors'])).stdout).toContain('no import errors');
  }, 60_000);

  it('a changed file is a new version; a removed one leaves its DAG inactive', async () => {
    writeDag(
      'manual',
      'dag_id: manual\nschedule: null\ntasks:\n  - task_id: greet\n    command: echo "hello from $AIRFLOW_CTX_DAG_RUN_ID"\n  - task_id: bye\n    command: echo bye\n    depends_on: [greet]\n',
    );
    await eventually(async () => ((await dag('manual'))?.current_version === 2 ? true : undefined));
    writeDag('gone', 'dag_id: gone\ntasks:\n  - task_id: a\n    command: echo a\n');
    await eventually(async () => dag('gone'));
    rmSync(join(dags, 'gone'), { recursive: true });
    await eventually(async () => ((await dag('gone'))?.is_active === false ? true : undefined));
  }, 60_000);
});

describe('`latest` as a run id', () => {
  it('names the newest run of --dag in logs and show; without --dag it is a usage error; no run may be called latest', async () => {
    const first = await as(['runs', 'trigger', 'manual', '--wait', '-o', 'json']);
    expect(first.code).toBe(0);
    const second = await as(['runs', 'trigger', 'manual', '--wait', '-o', 'json']);
    expect(second.code).toBe(0);
    const newest = (JSON.parse(second.stdout) as { run: { run_id: string } }).run.run_id;
    const logs = await as(['tasks', 'logs', 'latest', 'greet', '--dag', 'manual']);
    expect(logs.code).toBe(0);
    expect(logs.stdout).toContain(`hello from ${newest}`);
    const show = await as(['runs', 'show', 'latest', '--dag', 'manual', '-o', 'json']);
    expect(JSON.parse(show.stdout)).toMatchObject({ run: { run_id: newest } });
    const noDag = await as(['tasks', 'logs', 'latest', 'greet']);
    expect(noDag.code).toBe(2);
    expect(noDag.stderr).toContain('--dag <dag_id>');
    const noRuns = await as(['runs', 'show', 'latest', '--dag', 'broken']);
    expect(noRuns.code).toBe(1);
    expect(noRuns.stderr).toContain('has no run yet');
    const reserved = await as(['runs', 'trigger', 'manual', '--run-id', 'latest']);
    expect(reserved.code).toBe(1);
    expect(reserved.stderr).toContain('reserved');
  }, 90_000);
});

describe('leoflow login', () => {
  it('prints in the banner, refuses a bad token without writing, and writes a 0600 profile the CLI uses', async () => {
    const tokenFile = join(lite.dataDir, 'admin.token');
    expect(lite.output()).toContain(`leoflow login --url ${lite.url} --token-file ${tokenFile}`);
    const env = { LEOFLOW_CLI_CONFIG: cliConfig, LEOFLOW_TOKEN: '', LEOFLOW_URL: '' };
    const badFile = join(scratch.dir, 'bad.token');
    writeFileSync(badFile, 'not-a-token\n');
    const bad = await cli(['login', '--url', lite.url, '--token-file', badFile], env);
    expect(bad.code).toBe(1);
    expect(existsSync(cliConfig)).toBe(false);
    const ok = await cli(['login', '--url', lite.url, '--token-file', tokenFile], env);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toContain('profile "local" saved');
    expect(statSync(cliConfig).mode & 0o777).toBe(0o600);
    const saved = parse(readFileSync(cliConfig, 'utf8')) as {
      current_profile: string;
      profiles: Record<string, { url: string; token: string }>;
    };
    expect(saved.current_profile).toBe('local');
    expect(saved.profiles['local']).toEqual({ url: lite.url, token: lite.token });
    // no --url, no token: the profile is used
    const list = await cli(['dags', 'list', '-o', 'json'], env);
    expect(list.code, list.stderr).toBe(0);
    expect(JSON.parse(list.stdout)).toMatchObject({ dags: expect.any(Array) });
  }, 30_000);
});
