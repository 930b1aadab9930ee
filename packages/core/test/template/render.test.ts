import { describe, expect, it } from 'vitest';
import {
  checkTemplate,
  contextEnv,
  hasTemplateSyntax,
  renderTemplate,
  templateScope,
  type RunContextInput,
  type TemplateConnection,
} from '../../src/index.js';

const run: RunContextInput = {
  dagId: 'etl',
  runId: 'scheduled__2026-12-07T00:00:00.000Z',
  taskId: 'load',
  tryNumber: 2,
  runType: 'scheduled',
  logicalDate: '2026-12-07T00:00:00.000Z',
  dataIntervalStart: '2026-12-06T00:00:00.000Z',
  dataIntervalEnd: '2026-12-07T00:00:00.000Z',
  prevDataIntervalStartSuccess: '2026-12-05T00:00:00.000Z',
  prevDataIntervalEndSuccess: '2026-12-06T00:00:00.000Z',
  conf: { table: 'orders', n: 3, deep: { a: [1, 2] } },
  params: { batch: 100, flag: true, region: 'eu' },
};
const db: TemplateConnection = {
  conn_id: 'db',
  conn_type: 'postgres',
  host: 'db.internal',
  schema: 'prod',
  login: 'app',
  password: 's3cret',
  port: 5432,
  extra: '{"sslmode": "require"}',
  extra_dejson: { sslmode: 'require' },
};
const scope = templateScope(run, { api_key: 'k-123', cfg: '{"limit": 7}' }, { db });

function render(t: string): string {
  const r = renderTemplate(t, scope);
  if (!r.ok) throw new Error(`${r.problem.code}: ${r.problem.message}`);
  return r.text;
}
function problem(t: string, s = scope) {
  const r = renderTemplate(t, s);
  if (r.ok) throw new Error(`rendered ${JSON.stringify(r.text)}`);
  return r.problem;
}

describe('template rendering', () => {
  it('renders Airflow-shaped dates', () => {
    expect(render('{{ ds }} {{ ds_nodash }} {{ ts }}')).toBe(
      '2026-12-07 20261207 2026-12-07T00:00:00+00:00',
    );
    expect(render('{{ ts_nodash }} {{ ts_nodash_with_tz }}')).toBe(
      '20261207T000000 20261207T000000+0000',
    );
    expect(render('{{logical_date}}|{{ data_interval_start }}|{{ data_interval_end }}')).toBe(
      '2026-12-07 00:00:00+00:00|2026-12-06 00:00:00+00:00|2026-12-07 00:00:00+00:00',
    );
    expect(render('{{ prev_data_interval_start_success }}')).toBe('2026-12-05 00:00:00+00:00');
  });

  it('reads params, conf, run ids and attributes', () => {
    expect(render('{{ params.batch }}/{{ params.flag }}/{{ params["region"] }}')).toBe(
      '100/True/eu',
    );
    expect(
      render('{{ dag_run.conf.table }} {{ dag_run.conf["n"] }} {{ dag_run.conf.deep.a[1] }}'),
    ).toBe('orders 3 2');
    expect(render('{{ dag_run.conf.deep }}')).toBe('{"a":[1,2]}');
    expect(
      render(
        '{{ run_id }} {{ dag_run.run_id }} {{ dag.dag_id }}.{{ task.task_id }} {{ ti.try_number }}',
      ),
    ).toBe('scheduled__2026-12-07T00:00:00.000Z scheduled__2026-12-07T00:00:00.000Z etl.load 2');
  });

  it('applies ds_add, ds_format and default, and macros.* calls', () => {
    expect(render('{{ ds | ds_add(7) }} {{ ds | ds_add(-7) }} {{ ds|ds_add(0) }}')).toBe(
      '2026-12-14 2026-11-30 2026-12-07',
    );
    expect(render("{{ ds | ds_format('%Y-%m-%d', '%d/%m/%y %a %b %j') }}")).toBe(
      '07/12/26 Mon Dec 341',
    );
    expect(
      render("{{ macros.ds_add(ds, 30) }} {{ macros.ds_format(ds, '%Y-%m-%d', '%Y%m') }}"),
    ).toBe('2027-01-06 202612');
    expect(render("{{ dag_run.conf.missing | default('none') }}")).toBe('none');
    expect(render("{{ dag_run.conf.table | default('x') }}")).toBe('orders');
    expect(render("{{ '' | default('empty', true) }}")).toBe('empty');
    expect(render('{{ dag_run.conf.missing | default(params.batch) }}')).toBe('100');
  });

  it('reads only delivered variables and connections', () => {
    expect(render('{{ var.value.api_key }} {{ var.json.cfg.limit }}')).toBe('k-123 7');
    expect(
      render(
        '{{ conn.db.host }}:{{ conn.db.port }} {{ conn.db.password }} {{ conn.db.extra_dejson.sslmode }}',
      ),
    ).toBe('db.internal:5432 s3cret require');
    expect(problem('{{ var.value.other }}').code).toBe('LF_TEMPLATE_NOT_DECLARED');
    expect(problem('{{ conn.other.host }}').code).toBe('LF_TEMPLATE_NOT_DECLARED');
    expect(problem('{{ conn.db.get_uri }}').code).toBe('LF_TEMPLATE_UNSUPPORTED');
  });

  it('fails on undefined names at run time, with the offset', () => {
    const p = problem('echo {{ dag_run.conf.nope }}');
    expect(p.code).toBe('LF_TEMPLATE_UNDEFINED');
    expect(p.message).toContain('dag_run.conf.nope');
    expect(p.offset).toBe(8);
    const manual = templateScope({ ...run, logicalDate: null }, {}, {});
    expect(problem('{{ ds }}', manual).code).toBe('LF_TEMPLATE_UNDEFINED');
    expect(renderTemplate("{{ ds | default('none') }}", manual)).toEqual({
      ok: true,
      text: 'none',
    });
  });

  it('has escapes for a literal {{', () => {
    expect(render("docker inspect -f '{{ '{{' }}.State.Running}}' c")).toBe(
      "docker inspect -f '{{.State.Running}}' c",
    );
    expect(render("{% raw %}awk '{{print}}' {{ x }}{% endraw %} {{ ds }}")).toBe(
      "awk '{{print}}' {{ x }} 2026-12-07",
    );
    // bash's ${#arr[@]} and ${x%y} are not template syntax
    expect(render('echo ${#arr[@]} ${f%.txt} {#x#}')).toBe('echo ${#arr[@]} ${f%.txt} {#x#}');
    expect(hasTemplateSyntax('echo ${#arr[@]} ${f%.txt}')).toBe(false);
    // printf's {%s} is not a statement: {% only opens one as {% word … %} on its line
    expect(render("printf '{%s}\\n' x")).toBe("printf '{%s}\\n' x");
    expect(hasTemplateSyntax("printf '{%s}' x")).toBe(false);
    expect(hasTemplateSyntax('{% if x %}')).toBe(true);
    expect(hasTemplateSyntax('a {{ b }}')).toBe(true);
  });

  it('refuses code, statements and unknown filters', () => {
    expect(problem('{{ params.batch + 1 }}').code).toBe('LF_TEMPLATE_UNSUPPORTED');
    expect(problem('{{ run_id.upper() }}').code).toBe('LF_TEMPLATE_UNSUPPORTED');
    expect(problem('{% if x %}a{% endif %}').code).toBe('LF_TEMPLATE_UNSUPPORTED');
    expect(problem('{{ ds | upper }}').message).toContain('"upper"');
    expect(problem('{{ ds ').code).toBe('LF_TEMPLATE_SYNTAX');
    expect(problem("{{ ''.__class__ }}").code).toBe('LF_TEMPLATE_SYNTAX');
    expect(problem('{{ ds | ds_add("x") }}').code).toBe('LF_TEMPLATE_FILTER');
  });
});

describe('static checks', () => {
  const s = { params: { batch: 1 }, variables: ['api_key'], connections: ['db'] };
  it('accepts what any run can render', () => {
    expect(
      checkTemplate(
        '{{ ds }} {{ params.batch }} {{ dag_run.conf.x }} {{ var.value.api_key }} {{ conn.db.host }}',
        s,
      ),
    ).toEqual([]);
    expect(checkTemplate("{{ params.other | default('z') }}", s)).toEqual([]);
  });
  it('names undefined names, undeclared secrets and Airflow names that are gone', () => {
    const codes = (t: string) => checkTemplate(t, s).map((p) => [p.code, p.offset]);
    expect(codes('x {{ dss }}')).toEqual([['LF_TEMPLATE_UNDEFINED', 5]]);
    expect(codes('{{ params.other }}')).toEqual([['LF_TEMPLATE_UNDEFINED', 3]]);
    expect(codes('{{ var.value.token }}')).toEqual([['LF_TEMPLATE_NOT_DECLARED', 3]]);
    expect(codes('{{ conn.warehouse.login }}')).toEqual([['LF_TEMPLATE_NOT_DECLARED', 3]]);
    expect(checkTemplate('{{ execution_date }}', s)[0]!.hint).toContain('logical_date');
    expect(codes("{{ ds | ds_format('%Y-%m-%d', '%G') }}")).toEqual([['LF_TEMPLATE_FILTER', 30]]);
  });
});

describe('context environment', () => {
  it('exports the date values under Leoflow names and the logical date as Airflow does', () => {
    expect(contextEnv(run)).toEqual({
      AIRFLOW_CTX_LOGICAL_DATE: '2026-12-07T00:00:00+00:00',
      LEOFLOW_DS: '2026-12-07',
      LEOFLOW_DS_NODASH: '20261207',
      LEOFLOW_TS: '2026-12-07T00:00:00+00:00',
      LEOFLOW_TS_NODASH: '20261207T000000',
      LEOFLOW_TS_NODASH_WITH_TZ: '20261207T000000+0000',
      LEOFLOW_DATA_INTERVAL_START: '2026-12-06T00:00:00.000Z',
      LEOFLOW_DATA_INTERVAL_END: '2026-12-07T00:00:00.000Z',
      LEOFLOW_PREV_DATA_INTERVAL_START_SUCCESS: '2026-12-05T00:00:00.000Z',
      LEOFLOW_PREV_DATA_INTERVAL_END_SUCCESS: '2026-12-06T00:00:00.000Z',
      LEOFLOW_RUN_TYPE: 'scheduled',
    });
    expect(contextEnv({ ...run, logicalDate: '2026-12-07T01:02:03.450Z' }).LEOFLOW_TS).toBe(
      '2026-12-07T01:02:03.450000+00:00',
    );
  });
});
