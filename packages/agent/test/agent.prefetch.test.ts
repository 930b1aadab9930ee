import { describe, expect, it } from 'vitest';
import { Code } from '@connectrpc/connect';
import { LogStream, ReportedState } from '@leoflow/protocol';
import { defaultSpec, type Script } from './support/fake-agent-service.js';
import { useHarness } from './support/harness.js';
import { REVERSED, unreversed } from './support/unmasked-print.js';

const { runAgent } = useHarness();

/**
 * Register's prefetch (RegisterRequest.prefetch): a server that answers it saves the agent its
 * GetTaskSpec, GetVariables, GetConnections and FetchXCom calls; a part it leaves unset is
 * fetched as before, and one it answers as refused runs the task without it, as a refused call
 * would.
 */
const PRINT =
  'echo "var=${AIRFLOW_VAR_GREETING:-unset} conn=${AIRFLOW_CONN_WAREHOUSE:-unset} xcom=${LEOFLOW_XCOM_UP:-unset}"' +
  REVERSED;

function script(extra: Partial<Script> = {}): Script {
  return {
    spec: defaultSpec({ command: PRINT, dependsOn: ['up'] }),
    variables: { greeting: 'hi' },
    connections: { warehouse: 'postgres://u:p@db/wh' },
    xcoms: { up: '42' },
    ...extra,
  };
}

const PREPARATION_CALLS = ['GetTaskSpec', 'GetVariables', 'GetConnections', 'FetchXCom'];

describe('agent process: Register prefetch', () => {
  it('asks for it at Register and, answered, makes no preparation call; the task gets the same env', async () => {
    const { fake, code } = await runAgent(script({ prefetch: 'all' }));
    expect(code).toBe(0);
    expect(fake.registers[0]).toMatchObject({ prefetch: true, wantSpec: true });
    expect(unreversed(fake.lines(LogStream.STDOUT))).toEqual([
      'var=hi conn=postgres://u:p@db/wh xcom=42',
    ]);
    for (const m of PREPARATION_CALLS) expect(fake.callsOf(m), m).toHaveLength(0);
    expect(fake.reports[0]!.state).toBe(ReportedState.SUCCESS);
  });

  it('a server that ignores the request (older): the same env through the separate calls', async () => {
    const { fake, code } = await runAgent(script());
    expect(code).toBe(0);
    expect(unreversed(fake.lines(LogStream.STDOUT))).toEqual([
      'var=hi conn=postgres://u:p@db/wh xcom=42',
    ]);
    for (const m of PREPARATION_CALLS) expect(fake.callsOf(m), m).toHaveLength(1);
  });

  it('parts left unset are fetched with their own calls; the answered ones are not', async () => {
    const { fake, code } = await runAgent(
      script({
        prefetch: (req) => ({
          variables: { variables: { greeting: 'from-register' } },
          ...(req.wantSpec
            ? { spec: { spec: defaultSpec({ command: PRINT, dependsOn: ['up'] }) } }
            : {}),
        }),
      }),
    );
    expect(code).toBe(0);
    expect(unreversed(fake.lines(LogStream.STDOUT))).toEqual([
      'var=from-register conn=postgres://u:p@db/wh xcom=42',
    ]);
    expect(fake.callsOf('GetVariables')).toHaveLength(0);
    expect(fake.callsOf('GetTaskSpec')).toHaveLength(0);
    expect(fake.callsOf('GetConnections')).toHaveLength(1);
    expect(fake.callsOf('FetchXCom')).toHaveLength(1);
  });

  it('an upstream missing from the prefetched XComs is fetched alone', async () => {
    const { fake, code } = await runAgent(
      script({
        spec: defaultSpec({
          command: 'echo "$LEOFLOW_XCOM_UP/$LEOFLOW_XCOM_OTHER"',
          dependsOn: ['up', 'other'],
        }),
        xcoms: { up: 'u', other: 'o' },
        prefetch: () => ({
          xcoms: {
            upstreams: [
              { upstreamTaskId: 'up', xcom: { found: true, value: new TextEncoder().encode('u') } },
            ],
          },
        }),
      }),
    );
    expect(code).toBe(0);
    expect(fake.lines(LogStream.STDOUT)).toEqual(['u/o']);
    expect(fake.callsOf('FetchXCom')).toHaveLength(1);
  });

  it('refused at Register: the task runs without that part, the refusal is logged, and it is not asked again', async () => {
    const { fake, code, diag } = await runAgent(
      script({
        prefetch: 'all',
        variables: Code.PermissionDenied,
        connections: Code.PermissionDenied,
      }),
    );
    expect(code).toBe(0);
    expect(unreversed(fake.lines(LogStream.STDOUT))).toEqual(['var=unset conn=unset xcom=42']);
    const agentLines = fake.lines(LogStream.AGENT);
    expect(agentLines).toContain('secret fetch refused: PermissionDenied (variables)');
    expect(agentLines).toContain('secret fetch refused: PermissionDenied (connections)');
    expect(diag).toContain('secret fetch refused: PermissionDenied');
    expect(fake.callsOf('GetVariables')).toHaveLength(0);
    expect(fake.callsOf('GetConnections')).toHaveLength(0);
  });

  it('a Register that says stop runs nothing, prefetch or not', async () => {
    const { fake, code } = await runAgent(
      script({
        prefetch: 'all',
        register: () => ({ shouldTerminate: true, terminateReason: 'superseded' }),
      }),
    );
    expect(code).toBe(2);
    expect(fake.lines(LogStream.STDOUT)).toEqual([]);
    for (const m of PREPARATION_CALLS) expect(fake.callsOf(m), m).toHaveLength(0);
  });
});
