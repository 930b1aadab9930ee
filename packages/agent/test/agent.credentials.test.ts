import { readFileSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Code } from '@connectrpc/connect';
import { LogStream, ReportedState } from '@leoflow/protocol';
import { defaultSpec } from './support/fake-agent-service.js';
import { useHarness } from './support/harness.js';
import { REVERSED, unreversed } from './support/unmasked-print.js';

const { runAgent, tempDir, startFake, start } = useHarness();

describe('agent process: credential delivery', () => {
  it('exports secrets and runtime context, strips agent-only LEOFLOW_* and author LEOFLOW_* env', async () => {
    const big = 'x'.repeat(64 * 1024 + 1);
    const { fake, code, workdir } = await runAgent(
      {
        spec: defaultSpec({
          command: 'env -0 | tr "\\0" "\\n" | grep -v "^$" | LC_ALL=C sort' + REVERSED,
          env: {
            AUTHOR_VAR: 'from-author',
            LEOFLOW_EVIL: 'author-set',
            leoflow_lower: 'author-set',
            HOME: '/nope',
          },
          logicalDate: '2026-01-01T00:00:00Z',
          dataIntervalStart: '2026-01-01T00:00:00Z',
          dataIntervalEnd: '2026-01-02T00:00:00Z',
          paramsJson: '{"p":1}',
          confJson: '{"c":true}',
          tryNumber: 2,
          dependsOn: ['extract-step', 'big.one', 'binary', 'missing'],
        }),
        variables: { greeting: 'hi', 'Mixed.Key': 'v2' },
        connections: { warehouse: 'postgres://u:p%40ss@db.example:5432/wh' },
        xcoms: {
          'extract-step': '{"rows": 3}',
          'big.one': big,
          binary: new Uint8Array([0xff, 0xfe, 0x00]),
        },
      },
      {
        env: {
          LEOFLOW_STAGING_DIR: '/staging',
          LEOFLOW_SOME_OPERATOR_SECRET: 'agent-only',
          leoflow_lowercase_agent: 'agent-only',
          LEOFLOW_PYTHON: 'python3',
          TZ: 'UTC',
        },
      },
    );
    expect(code).toBe(0);
    const env = new Map<string, string>();
    for (const line of unreversed(fake.lines(LogStream.STDOUT))) {
      const i = line.indexOf('=');
      env.set(line.slice(0, i), line.slice(i + 1));
    }
    expect(env.get('AIRFLOW_VAR_GREETING')).toBe('hi');
    expect(env.get('AIRFLOW_VAR_MIXED.KEY')).toBe('v2');
    expect(env.get('AIRFLOW_CONN_WAREHOUSE')).toBe('postgres://u:p%40ss@db.example:5432/wh');
    expect(env.get('AIRFLOW_CTX_DAG_ID')).toBe('demo');
    expect(env.get('AIRFLOW_CTX_DAG_RUN_ID')).toBe('manual__2026-01-01T00:00:00Z');
    expect(env.get('AIRFLOW_CTX_TASK_ID')).toBe('t1');
    expect(env.get('AIRFLOW_CTX_TRY_NUMBER')).toBe('2');
    // as Airflow exports it (datetime.isoformat()), and the template context's date values
    expect(env.get('AIRFLOW_CTX_LOGICAL_DATE')).toBe('2026-01-01T00:00:00+00:00');
    expect(env.get('LEOFLOW_DS')).toBe('2026-01-01');
    expect(env.get('LEOFLOW_DS_NODASH')).toBe('20260101');
    expect(env.get('LEOFLOW_TS')).toBe('2026-01-01T00:00:00+00:00');
    expect(env.get('LEOFLOW_TS_NODASH')).toBe('20260101T000000');
    expect(env.get('LEOFLOW_TS_NODASH_WITH_TZ')).toBe('20260101T000000+0000');
    expect(env.get('LEOFLOW_RUN_ID')).toBe('manual__2026-01-01T00:00:00Z');
    expect(env.get('LEOFLOW_PARAMS')).toBe('{"p":1}');
    expect(env.get('LEOFLOW_RUN_CONF')).toBe('{"c":true}');
    expect(env.get('LEOFLOW_DATA_INTERVAL_START')).toBe('2026-01-01T00:00:00Z');
    expect(env.get('LEOFLOW_DATA_INTERVAL_END')).toBe('2026-01-02T00:00:00Z');
    expect(env.get('LEOFLOW_XCOM_DIR')).toBe(path.join(workdir, 'xcom'));
    expect(env.get('LEOFLOW_SECRET_READS_FILE')).toBe(path.join(workdir, '.leoflow-secret-reads'));
    expect(env.get('LEOFLOW_XCOM_EXTRACT_STEP')).toBe('{"rows": 3}');
    expect(env.has('LEOFLOW_XCOM_BIG_ONE')).toBe(false); // over 64 KiB: file only
    expect(env.has('LEOFLOW_XCOM_BINARY')).toBe(false); // not UTF-8: file only
    expect(env.has('LEOFLOW_XCOM_MISSING')).toBe(false);
    expect(readFileSync(path.join(workdir, 'xcom', 'extract-step'), 'utf8')).toBe('{"rows": 3}');
    expect(readFileSync(path.join(workdir, 'xcom', 'big.one'), 'utf8')).toBe(big);
    expect([...readFileSync(path.join(workdir, 'xcom', 'binary'))]).toEqual([0xff, 0xfe, 0x00]);
    expect(env.get('HOME')).toBe(workdir);
    expect(env.get('AUTHOR_VAR')).toBe('from-author');
    expect(env.get('TZ')).toBe('UTC');
    expect(env.get('LEOFLOW_STAGING_DIR')).toBe('/staging');
    expect(env.get('LEOFLOW_TASK_INSTANCE_ID')).toBe('ti-1');
    for (const gone of [
      'LEOFLOW_AGENT_URL',
      'LEOFLOW_WORKDIR',
      'LEOFLOW_HEARTBEAT_INTERVAL_MS',
      'LEOFLOW_SOME_OPERATOR_SECRET',
      'leoflow_lowercase_agent',
      'LEOFLOW_PYTHON',
      'LEOFLOW_EVIL',
      'leoflow_lower',
    ]) {
      expect(env.has(gone), gone).toBe(false);
    }
    const leoflowNames = [...env.keys()]
      .filter((k) => k.toUpperCase().startsWith('LEOFLOW_'))
      .sort();
    expect(leoflowNames).toEqual(
      [
        'LEOFLOW_DATA_INTERVAL_END',
        'LEOFLOW_DATA_INTERVAL_START',
        'LEOFLOW_DS',
        'LEOFLOW_DS_NODASH',
        'LEOFLOW_TS',
        'LEOFLOW_TS_NODASH',
        'LEOFLOW_TS_NODASH_WITH_TZ',
        'LEOFLOW_PARAMS',
        'LEOFLOW_RUN_CONF',
        'LEOFLOW_RUN_ID',
        'LEOFLOW_SECRET_READS_FILE',
        'LEOFLOW_STAGING_DIR',
        'LEOFLOW_TASK_INSTANCE_ID',
        'LEOFLOW_XCOM_DIR',
        'LEOFLOW_XCOM_EXTRACT_STEP',
      ].sort(),
    );
    expect(fake.callsOf('FetchXCom')).toHaveLength(4);
  });

  it('runs the task without secrets when GetConnections/GetVariables are refused', async () => {
    const { fake, code, diag } = await runAgent({
      spec: defaultSpec({
        command: 'echo "conn=${AIRFLOW_CONN_WAREHOUSE:-unset} var=${AIRFLOW_VAR_GREETING:-unset}"',
      }),
      variables: Code.Unimplemented,
      connections: Code.PermissionDenied,
    });
    expect(code).toBe(0);
    expect(fake.lines(LogStream.STDOUT)).toEqual(['conn=unset var=unset']);
    const agentLines = fake.lines(LogStream.AGENT);
    expect(agentLines).toContain('secret fetch refused: PermissionDenied (connections)');
    expect(agentLines).toContain('secret fetch refused: Unimplemented (variables)');
    expect(diag).toContain('secret fetch refused: PermissionDenied');
    expect(fake.reports[0]!.state).toBe(ReportedState.SUCCESS);
  });

  it('exports the granted half when only one secret fetch is refused', async () => {
    const { fake, code } = await runAgent({
      spec: defaultSpec({
        command: 'echo "conn=${AIRFLOW_CONN_WAREHOUSE:-unset} var=${AIRFLOW_VAR_GREETING:-unset}"',
      }),
      variables: { greeting: 'hi' },
      connections: Code.PermissionDenied,
    });
    expect(code).toBe(0);
    expect(fake.lines(LogStream.STDOUT)).toEqual(['conn=unset var=hi']);
  });

  it('CREDENTIAL CANARY: the token is in no env, /proc entry or readable file the task can reach', async () => {
    // Assembled at runtime so no file (this source, vitest's transform cache) holds the prefix.
    const prefix = ['LF', 'CANARY', 'TOKEN'].join('_');
    const workdir = tempDir();
    const since = path.join(workdir, '.since');
    writeFileSync(since, '');
    // Dated back, so -newer sees the decoy below whatever the filesystem's mtime granularity.
    const earlier = new Date(Date.now() - 2000);
    utimesSync(since, earlier, earlier);
    const canary = `${prefix}_${Math.random().toString(36).slice(2, 10)}${Date.now().toString(36)}`;
    const fake = await startFake({
      spec: defaultSpec({
        // The pattern cannot match itself ([Y], [N]), so grep finds only a real leak.
        command: [
          'echo "== env"; env',
          'echo "== parent environ"; tr "\\0" "\\n" < /proc/$PPID/environ',
          'echo "== parent cmdline"; tr "\\0" " " < /proc/$PPID/cmdline; echo',
          'echo "== self environ"; tr "\\0" "\\n" < /proc/self/environ',
          'echo "== parent fds"; ls -l /proc/$PPID/fd 2>&1',
          'echo "== ps"; (ps -eo pid,args 2>/dev/null || true)',
          'echo "== grep"',
          // Only files written since the agent started can hold the token (it was made just
          // before), so the search skips whatever else /tmp holds (another checkout's
          // node_modules made a whole-tree grep outlast the test in CI). A grep cut short by
          // the timeout reports its status, so "nothing found" is never a timeout in disguise.
          `find "$PWD" /tmp -xdev -type f -newer '${since}' -print0 2>/dev/null | timeout 45 xargs -0 -r grep -a -o -s -H -E "LF_CANAR[Y]_TOKE[N]_[a-z0-9]{8,}"; echo "GREP_STATUS=$?"`,
        ].join('\n'),
      }),
      variables: { greeting: 'hi' },
    });
    // Positive control: a planted decoy with the same shape must be found, proving the grep works.
    const decoy = `${prefix}_decoy${Math.random().toString(36).slice(2, 10)}`;
    const decoyFile = path.join(workdir, 'planted-decoy.bin');
    writeFileSync(decoyFile, Buffer.concat([Buffer.from([0, 1, 2]), Buffer.from(decoy)]));
    const agent = start({ url: fake.url, token: canary, workdir });
    const { code } = await agent.exited;
    expect(code, agent.diagnostics()).toBe(0);
    const out = fake.lines().join('\n');
    expect(out).toContain('== parent environ');
    expect(out).toContain('LEOFLOW_AGENT_URL='); // we really read the agent's environ…
    expect(out).toMatch(/== parent cmdline\n\S*node \S+\.m?js/); // …and its argv
    const grepped = out.slice(out.indexOf('== grep'));
    expect(grepped).toContain(`planted-decoy.bin:${decoy}`);
    // 0 or 123 (some grep batch matched nothing or met a file closed to the task uid): the
    // search finished. 124 is the timeout's: it did not, and nothing above would be proven.
    expect(grepped).toMatch(/^GREP_STATUS=(0|123)$/m);
    const matches = [...out.matchAll(new RegExp(`${prefix}_[a-z0-9]+`, 'g'))].map((m) => m[0]);
    expect(new Set(matches)).toEqual(new Set([decoy]));
    expect(out).not.toContain(canary);
    // fd 3 was closed before the task started.
    const fdSection = out.slice(out.indexOf('== parent fds'), out.indexOf('== ps'));
    expect(fdSection).not.toMatch(/ 3 -> pipe:/);
    expect(agent.diagnostics()).not.toContain(canary);
    // The server saw it only as the bearer.
    expect(fake.calls.every((c) => c.authorization === `Bearer ${canary}`)).toBe(true);
  }, 90_000);
});
