import { LogStream, ReportedState } from '@leoflow/protocol';
import { describe, expect, it } from 'vitest';
import { defaultSpec } from './support/fake-agent-service.js';
import { useHarness } from './support/harness.js';

const { runAgent } = useHarness();

/**
 * Issue 34: the agent masks every delivered value (and its common encodings) in the task's log
 * lines and XCom before they leave it, keeps the count in the log, and tells Register it does.
 */
const VAR = 'canary-agent-var-81f2';
const PW = 'canary-pw-44e0';

describe('agent process: the secrets masker', () => {
  it('masks delivered values in stdout, stderr and the XCom value; the log says how many', async () => {
    const { fake } = await runAgent({
      spec: defaultSpec({
        command: [
          'echo "var $AIRFLOW_VAR_TOKEN"',
          'printf %s "$AIRFLOW_VAR_TOKEN" | base64',
          'echo "conn $AIRFLOW_CONN_WAREHOUSE" >&2',
          'echo "{\\"pw\\": \\"' + PW + '\\"}"',
        ].join('\n'),
        doXcomPush: true,
      }),
      variables: { token: VAR },
      connections: { warehouse: `postgres://etl_user:${PW}@db.internal:5432/wh` },
    });
    const out = fake.lines(LogStream.STDOUT);
    const err = fake.lines(LogStream.STDERR);
    expect(out).toEqual(['var ***', '***', '{"pw": "***"}']);
    expect(err).toEqual(['conn ***']);
    const all = JSON.stringify([
      out,
      err,
      fake.lines(LogStream.AGENT),
      fake.xcomPushes.map((x) => new TextDecoder().decode(x.value)),
    ]);
    for (const secret of [VAR, PW, Buffer.from(VAR).toString('base64')])
      expect(all).not.toContain(secret);
    expect(new TextDecoder().decode(fake.xcomPushes[0]?.value)).toBe('{"pw": "***"}');
    expect(fake.lines(LogStream.AGENT)).toContain(
      "masked 4 occurrence(s) of delivered secret values (or their encodings) in the task's output",
    );
    expect(fake.registers[0]).toMatchObject({ masksSecrets: true });
    expect(fake.reports[0]!.state).toBe(ReportedState.SUCCESS);
  });

  it('with nothing delivered, output is untouched and no count is logged', async () => {
    const { fake } = await runAgent({
      spec: defaultSpec({ command: 'echo "plain line 12345"' }),
    });
    expect(fake.lines(LogStream.STDOUT)).toEqual(['plain line 12345']);
    expect(fake.lines(LogStream.AGENT).some((l) => l.startsWith('masked '))).toBe(false);
  });
});
