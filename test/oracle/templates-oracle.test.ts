import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { renderTemplate, templateScope, type RunContextInput } from '@leoflow/core';
import {
  airflowOracleAvailability,
  airflowOracleVenv,
  AIRFLOW_ORACLE_HOWTO,
} from '../support/airflow-oracle.js';
import { REPO } from '../support/processes.js';

/**
 * Issue 40 item 5, checked against Apache Airflow itself: every template here renders to the
 * same text with Leoflow's renderer (core/template) as with Airflow's Jinja environment and
 * macros, or fails in both. Airflow writes `{{ macros.ds_add(ds, 7) }}`; Leoflow also accepts the
 * filter form, which is compared with Airflow's macro call on the same value.
 */
const availability = airflowOracleAvailability('oracle');

const runs: { run: RunContextInput; airflow: Record<string, unknown> }[] = [
  '2026-12-07T00:00:00.000Z',
  '2024-02-29T23:59:59.123Z',
  '1999-12-31T06:05:04.000Z',
].map((ld) => {
  const start = new Date(Date.parse(ld) - 86_400_000).toISOString();
  const conf = { table: 'orders', n: 3, flag: false, none: null, list: ['a'] };
  const params = { batch: 100, flag: true, name: 'eu' };
  return {
    run: {
      dagId: 'oracle',
      runId: `scheduled__${ld}`,
      taskId: 't',
      tryNumber: 1,
      runType: 'scheduled',
      logicalDate: ld,
      dataIntervalStart: start,
      dataIntervalEnd: ld,
      prevDataIntervalStartSuccess: null,
      prevDataIntervalEndSuccess: null,
      conf,
      params,
    },
    airflow: {
      logical_date: ld,
      data_interval_start: start,
      data_interval_end: ld,
      conf,
      params,
      run_id: `scheduled__${ld}`,
    },
  };
});

/** [Leoflow's template, Airflow's template] — the same text where the syntax is shared. */
const templates: [string, string][] = [
  ...[
    '{{ ds }}|{{ ds_nodash }}|{{ ts }}|{{ ts_nodash }}|{{ ts_nodash_with_tz }}',
    '{{ logical_date }}|{{ data_interval_start }}|{{ data_interval_end }}',
    '{{ params.batch }} {{ params.flag }} {{ params["name"] }} {{ run_id }} {{ dag_run.run_id }}',
    '{{ dag_run.conf.table }} {{ dag_run.conf["n"] }} {{ dag_run.conf.flag }} {{ dag_run.conf.none }}',
    "{{ dag_run.conf.missing | default('fallback') }} {{ dag_run.conf.table | default('x') }}",
    "{{ dag_run.conf.flag | default('f', true) }} {{ dag_run.conf.none | default('n') }}",
    '{{ macros.ds_add(ds, 7) }} {{ macros.ds_add(ds, -400) }} {{ macros.ds_add(ds, 0) }}',
    "{{ macros.ds_format(ds, '%Y-%m-%d', '%d/%m/%y %a %A %b %B %j') }}",
    "{{ macros.ds_format(ts_nodash, '%Y%m%dT%H%M%S', '%I:%M %p %H') }}",
    "{{ '{{' }}.State}} {{ 'a' }}{{ 7 }}{{ true }}{{ none }}",
    '{% raw %}{{ not rendered }}{% endraw %} {{ ds }}',
    // (not compared: `{#` opens a Jinja comment, plain text here on purpose — bash's ${#arr[@]})
    'echo ${f%.txt} ${x:-y}',
    '{{ dag_run.conf.missing }}',
    "{{ macros.ds_add('not-a-date', 1) }}",
    "{{ macros.ds_format(ds, '%d/%m/%Y', '%Y') }}",
  ].map((t) => [t, t] as [string, string]),
  ['{{ ds | ds_add(7) }}', '{{ macros.ds_add(ds, 7) }}'],
  ["{{ ds | ds_format('%Y-%m-%d', '%Y%m') }}", "{{ macros.ds_format(ds, '%Y-%m-%d', '%Y%m') }}"],
];

type Answer = { ok: string } | { error: true };
let airflowAnswers: Answer[][] | undefined;
/** One Airflow process for every run (importing Airflow takes seconds). */
function airflow(): Answer[][] {
  if (airflowAnswers) return airflowAnswers;
  const venv = airflowOracleVenv('oracle');
  if (venv === null)
    throw new Error(`the Airflow oracle environment is missing: ${AIRFLOW_ORACLE_HOWTO}`);
  const out = execFileSync(
    join(venv, 'bin/python'),
    [join(REPO, 'test/oracle/templates_oracle.py')],
    {
      input: JSON.stringify({
        runs: runs.map((r) => r.airflow),
        templates: templates.map(([, a]) => a),
      }),
      encoding: 'utf8',
      env: { ...process.env, PYTHONWARNINGS: 'ignore' },
    },
  );
  airflowAnswers = JSON.parse(out) as Answer[][];
  return airflowAnswers;
}

describe.skipIf(availability === 'skip')('templates render as Airflow renders them', () => {
  it.each(runs.map((r, i) => [r.run.logicalDate!, i] as const))('logical date %s', (_ld, i) => {
    const r = runs[i]!;
    const expected = airflow()[i];
    const scope = templateScope(r.run, {}, {});
    const ours = templates.map(([t]) => {
      const res = renderTemplate(t, scope);
      return res.ok ? { ok: res.text } : { error: true };
    });
    expect(ours).toEqual(expected);
    // the cases include failures on both sides, or they would prove little
    expect(ours.filter((o) => 'error' in o).length).toBe(3);
  });
});
