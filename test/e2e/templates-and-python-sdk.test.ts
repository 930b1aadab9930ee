import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cli,
  scratchDir,
  startStandalone,
  writeDag,
  type Standalone,
} from '../support/processes.js';

/**
 * Issue 40 items 1 and 5 end to end (a real standalone, agent, sandbox and task): a bash task's
 * `{{ … }}` rendered from the run context and a declared variable (masked in its log), the same
 * context in the environment, and a python task on Debian's python3 importing the `leoflow`
 * package that nobody installed.
 */
const CANARY = `CANARYtpl${randomBytes(6).toString('hex')}`;
let scratch: ReturnType<typeof scratchDir>;
let sa: Standalone | undefined;
const env = () => ({ LEOFLOW_URL: sa!.url, LEOFLOW_TOKEN: sa!.token });

async function run(dagId: string, args: string[] = []) {
  const res = await cli(['runs', 'trigger', dagId, '--wait', '-o', 'json', ...args], env());
  const runId = (JSON.parse(res.stdout) as { run: { run_id: string } }).run.run_id;
  return { code: res.code, stderr: res.stderr, runId };
}

async function logOf(runId: string, taskId: string): Promise<string[]> {
  const logs = await cli(['tasks', 'logs', runId, taskId, '-o', 'json'], env());
  return (JSON.parse(logs.stdout) as { lines: { message: string }[] }).lines.map((l) => l.message);
}

beforeAll(async () => {
  scratch = scratchDir('leoflow-templates-');
  const dags = join(scratch.dir, 'dags');
  writeDag(
    dags,
    'daily_loop',
    `dag_id: daily_loop
params:
  batch: 10
variables: [api_key]
tasks:
  - task_id: templ
    command: |
      echo "ds={{ ds }} nodash={{ ds_nodash }} week_ago={{ ds | ds_add(-7) }}"
      echo "batch={{ params.batch }} table={{ dag_run.conf.table | default('none') }}"
      echo "key={{ var.value.api_key }} env_ds=$LEOFLOW_DS run_env=$RUN"
      echo "{{ '{{' }} kept }}"
    env:
      RUN: "{{ run_id }}"
    do_xcom_push: true
  - task_id: py
    type: python
    depends_on: [templ]
    command: |
      import leoflow, sys
      from leoflow import get_context, get_variable, xcom_pull, xcom_push
      c = get_context()
      print("py ds", c.ds, "conf", c.dag_run.conf.get("table"), "batch", c.params["batch"])
      print("py key", get_variable("api_key"))
      print("py upstream", xcom_pull("templ", json_value=False))
      print("py from", leoflow.__file__.rsplit("/", 2)[-2], sys.executable)
      try:
          get_variable("undeclared")
      except leoflow.LeoflowError as e:
          print("py error", e.code)
      xcom_push({"rows": 3})
`,
  );
  sa = await startStandalone({ dataDir: join(scratch.dir, 'data') });
  expect((await cli(['variables', 'set', 'api_key', CANARY], env())).code).toBe(0);
  const pushed = await cli(['dags', 'push', join(dags, 'daily_loop')], env());
  expect(pushed.code, pushed.stderr).toBe(0);
}, 120_000);

afterAll(async () => {
  await sa?.stop();
  scratch?.cleanup();
});

describe('templates and the Python SDK in a real run', () => {
  it('renders the bash command, exports the context, and python tasks import leoflow', async () => {
    const r = await run('daily_loop', ['--conf', '{"table":"orders"}']);
    const templ = await logOf(r.runId, 'templ');
    const py = await logOf(r.runId, 'py');
    const text = [...templ, ...py].join('\n');
    expect(r.code, text).toBe(0);
    const ds = /^ds=(\d{4}-\d{2}-\d{2}) /.exec(templ.find((l) => l.startsWith('ds=')) ?? '')?.[1];
    expect(ds, text).toBeDefined();
    const weekAgo = new Date(Date.parse(`${ds}T00:00:00Z`) - 7 * 86_400_000)
      .toISOString()
      .slice(0, 10);
    expect(templ).toContain(`ds=${ds} nodash=${ds!.replace(/-/g, '')} week_ago=${weekAgo}`);
    expect(templ).toContain('batch=10 table=orders');
    expect(templ).toContain(`key=*** env_ds=${ds} run_env=${r.runId}`);
    expect(templ).toContain('{{ kept }}');
    expect(py).toContain(`py ds ${ds} conf orders batch 10`);
    expect(py).toContain('py key ***');
    expect(py).toContain('py upstream {{ kept }}');
    expect(
      py.some((l) => /^py from leoflow \/usr\/bin\/python3/.test(l)),
      text,
    ).toBe(true);
    expect(py).toContain('py error LF_SDK_VARIABLE_MISSING');
    expect(text).not.toContain(CANARY);
  });

  it('a runtime-undefined name fails the task with the code and where', async () => {
    // no conf: dag_run.conf.table falls back to its default; a run's own undefined name fails
    const dags = join(scratch.dir, 'dags2');
    writeDag(
      dags,
      'undefined_conf',
      `dag_id: undefined_conf
tasks:
  - task_id: t
    command: echo {{ dag_run.conf.day }}
`,
    );
    expect((await cli(['dags', 'push', join(dags, 'undefined_conf')], env())).code).toBe(0);
    const r = await run('undefined_conf');
    expect(r.code).not.toBe(0);
    const lines = await logOf(r.runId, 't');
    expect(lines.join('\n')).toContain('template error in command at 1:9 (LF_TEMPLATE_UNDEFINED)');
  });

  it("a run sees the previous successful run's data interval (prev_data_interval_*_success)", async () => {
    const dags = join(scratch.dir, 'dags3');
    writeDag(
      dags,
      'prev_ctx',
      `dag_id: prev_ctx
tasks:
  - task_id: t
    command: echo "prev={{ prev_data_interval_start_success }} env=\${LEOFLOW_PREV_DATA_INTERVAL_START_SUCCESS:-unset}"
`,
    );
    expect((await cli(['dags', 'push', join(dags, 'prev_ctx')], env())).code).toBe(0);
    const first = await run('prev_ctx');
    expect(first.code).toBe(0);
    expect(await logOf(first.runId, 't')).toContain('prev=None env=unset');
    // a manual run's data interval is its logical date, which its run id spells
    const firstIso = /^manual__(.+Z)__/.exec(first.runId)![1]!;
    const second = await run('prev_ctx');
    expect(second.code).toBe(0);
    const d = new Date(firstIso);
    const airflowText = `${firstIso.slice(0, 10)} ${firstIso.slice(11, 19)}${d.getUTCMilliseconds() === 0 ? '' : `.${String(d.getUTCMilliseconds()).padStart(3, '0')}000`}+00:00`;
    expect(await logOf(second.runId, 't')).toContain(`prev=${airflowText} env=${firstIso}`);
  });
});
