import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, scratchDir, writeDag } from '../support/processes.js';

let scratch: ReturnType<typeof scratchDir>;
beforeAll(() => {
  scratch = scratchDir('leoflow-cli-');
});
afterAll(() => scratch.cleanup());

describe('leoflow CLI (real process)', () => {
  it('compiles a DAG folder to dag.json', async () => {
    const dir = writeDag(
      scratch.dir,
      'ok',
      'dag_id: ok\ntasks:\n  - task_id: a\n    command: echo a\n',
    );
    const res = await cli(['dags', 'compile', dir, '-o', 'json']);
    expect(res.code).toBe(0);
    expect(JSON.parse(res.stdout)).toMatchObject({ ok: true, dag_id: 'ok', tasks: 1 });
    const spec = JSON.parse(readFileSync(join(dir, 'dag.json'), 'utf8')) as {
      dag_id: string;
      schema_version: string;
    };
    expect(spec).toMatchObject({ dag_id: 'ok', schema_version: '1.0' });
  });

  it('reports an authoring error with its code, file:line:column and path, and writes nothing', async () => {
    const dir = writeDag(
      scratch.dir,
      'bad',
      'dag_id: bad\ntasks:\n  - task_id: a\n    command: echo a\n    depends_on: [nope]\n',
    );
    const res = await cli(['dags', 'compile', dir]);
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(/leoflow\.yaml:5:\d+/);
    expect(res.stderr).toContain('LF_DAG_UNKNOWN_UPSTREAM');
    expect(res.stderr).toContain('tasks[0].depends_on[0]');
    expect(existsSync(join(dir, 'dag.json'))).toBe(false);

    const json = await cli(['dags', 'validate', dir, '-o', 'json']);
    expect(json.code).toBe(1);
    const body = JSON.parse(json.stdout) as {
      ok: boolean;
      errors: { code: string; line: number }[];
    };
    expect(body.ok).toBe(false);
    expect(body.errors[0]).toMatchObject({ code: 'LF_DAG_UNKNOWN_UPSTREAM', line: 5 });
  });

  it('names the fix when there is no leoflow.yaml', async () => {
    const res = await cli(['dags', 'validate', scratch.dir + '/missing']);
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('no leoflow.yaml');
  });

  it('says how to reach the server when it is not running', async () => {
    const res = await cli(['dags', 'list'], {
      LEOFLOW_URL: 'http://127.0.0.1:9',
      LEOFLOW_TOKEN: 'x',
    });
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('cannot reach http://127.0.0.1:9');
    expect(res.stderr).toContain('LEOFLOW_URL');
  });

  it('exits 2 on a usage error', async () => {
    const res = await cli(['runs', 'trigger']);
    expect(res.code).toBe(2);
    const bad = await cli(['dags', 'list', '-o', 'xml']);
    expect(bad.code).toBe(2);
  });
});
