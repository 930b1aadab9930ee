import { LogStream, ReportedState } from '@leoflow/protocol';
import { describe, expect, it } from 'vitest';
import { defaultSpec } from './support/fake-agent-service.js';
import { useHarness } from './support/harness.js';

const { runAgent } = useHarness();

/**
 * Issue 40 item 5: the agent renders `{{ … }}` in a templated spec's bash command and env values
 * from the run context and the secrets it was delivered, and the masker hides delivered values
 * that a template put into the command.
 */
const PW = 'canary-tpl-pw-19c3';
const TOKEN = 'canary-tpl-var-77a0';

const run = {
  logicalDate: '2026-12-07T00:00:00.000Z',
  dataIntervalStart: '2026-12-06T00:00:00.000Z',
  dataIntervalEnd: '2026-12-07T00:00:00.000Z',
  prevDataIntervalStartSuccess: '2026-12-05T00:00:00.000Z',
  prevDataIntervalEndSuccess: '2026-12-06T00:00:00.000Z',
  runType: 'scheduled',
  paramsJson: '{"batch":100}',
  confJson: '{"table":"orders"}',
};

describe('agent process: templates', () => {
  it('renders the command and env from the run context and delivered secrets, masking them', async () => {
    const { fake, code } = await runAgent({
      spec: defaultSpec({
        ...run,
        templated: true,
        command: [
          'echo "day {{ ds }} {{ ds_nodash }} next {{ ds | ds_add(1) }} prev {{ prev_data_interval_start_success }}"',
          'echo "p {{ params.batch }} t {{ dag_run.conf.table }} x {{ dag_run.conf.x | default(\'none\') }}"',
          'echo "env $TABLE $DAY"',
          'echo "secret {{ var.value.token }} {{ conn.warehouse.password }} {{ conn.warehouse.host }}"',
          'echo "{{ \'{{\' }} literal }}"',
        ].join('\n'),
        env: {
          TABLE: '{{ dag_run.conf.table }}',
          DAY: "{{ ds | ds_format('%Y-%m-%d', '%d/%m/%Y') }}",
        },
      }),
      variables: { token: TOKEN },
      connections: { warehouse: `postgres://etl:${PW}@db.internal:5432/wh` },
    });
    expect(code).toBe(0);
    expect(fake.lines(LogStream.STDOUT)).toEqual([
      'day 2026-12-07 20261207 next 2026-12-08 prev 2026-12-05 00:00:00+00:00',
      'p 100 t orders x none',
      'env orders 07/12/2026',
      'secret *** *** db.internal',
      '{{ literal }}',
    ]);
    const all = JSON.stringify(
      [LogStream.STDOUT, LogStream.STDERR, LogStream.AGENT].map((s) => fake.lines(s)),
    );
    expect(all).not.toContain(PW);
    expect(all).not.toContain(TOKEN);
    expect(fake.reports[0]!.state).toBe(ReportedState.SUCCESS);
  });

  it('an undefined name at run time fails the attempt before the task starts, naming it and where', async () => {
    const { fake } = await runAgent({
      spec: defaultSpec({
        ...run,
        templated: true,
        command: 'touch ran\necho {{ dag_run.conf.missing }}',
      }),
    });
    const report = fake.reports[0]!;
    expect(report.state).toBe(ReportedState.FAILED);
    expect(report.errorMessage).toContain(
      'template error in command at 2:9 (LF_TEMPLATE_UNDEFINED)',
    );
    expect(report.errorMessage).toContain('dag_run.conf.missing is undefined');
    expect(fake.lines(LogStream.STDOUT)).toEqual([]);
    expect(fake.lines(LogStream.AGENT).some((l) => l.includes('LF_TEMPLATE_UNDEFINED'))).toBe(true);
  });

  it('a spec that is not marked templated runs its {{ text unchanged (versions compiled before templates)', async () => {
    const { fake, code } = await runAgent({
      spec: defaultSpec({ ...run, command: "echo '{{ ds }} {{.State}}'", env: { X: '{{ x }}' } }),
    });
    expect(code).toBe(0);
    expect(fake.lines(LogStream.STDOUT)).toEqual(['{{ ds }} {{.State}}']);
  });
});
