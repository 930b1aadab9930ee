import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { LogStream, PushLogsRequestSchema } from '@leoflow/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { AttemptLogBudgets, LOG_CAP_NOTE_LINE } from '../../packages/server/src/rpc/log-limits.js';
import { DEFAULT_LOG_LIMITS, type LogLimits } from '../../packages/server/src/config/log-limits.js';
import { createHarness, type Harness } from '../../packages/server/test/support/harness.js';
import {
  report,
  setupVaultAndDag,
  startAttempt,
} from '../../packages/server/test/attempts/support.js';
import { api, cli, scratchDir, startStandalone, writeDag } from '../support/processes.js';

/** Issue 10 item 4: a chatty task's log is stored whole; the server's caps say what they cut. */

interface LogLine {
  line_number: number;
  stream: string;
  message: string;
}

describe('log completeness (issue 10 item 4)', () => {
  it('stores all 300,000 lines of `seq 1 300000` through a real standalone, in order, no gaps', async () => {
    const s = scratchDir('leoflow-logs-');
    const dags = join(s.dir, 'dags');
    writeDag(
      dags,
      'chatty',
      'dag_id: chatty\ntasks:\n  - task_id: seq\n    command: seq 1 300000\n',
    );
    const sa = await startStandalone({ dataDir: join(s.dir, 'data'), dagsFolder: dags });
    try {
      const env = { LEOFLOW_URL: sa.url, LEOFLOW_TOKEN: sa.token };
      const res = await cli(['runs', 'trigger', 'chatty', '--wait', '-o', 'json'], env);
      expect(res.code).toBe(0);
      const runId = (JSON.parse(res.stdout) as { run: { run_id: string } }).run.run_id;
      const all: LogLine[] = [];
      let after = 0;
      for (;;) {
        const page = await api<{ lines: LogLine[]; next_after_line: number }>(
          sa,
          'GET',
          `/api/v1/dags/chatty/runs/${runId}/tasks/seq/logs?after_line=${after}&limit=10000`,
        );
        all.push(...page.lines);
        if (page.lines.length < 10_000) break;
        after = page.next_after_line;
      }
      const stdout = all.filter((l) => l.stream === 'stdout').map((l) => l.message);
      expect(stdout.length).toBe(300_000);
      let firstMismatch = -1;
      for (let i = 0; i < stdout.length && firstMismatch < 0; i++) {
        if (stdout[i] !== String(i + 1)) firstMismatch = i;
      }
      expect(firstMismatch).toBe(-1);
      // Line numbers are contiguous: nothing was dropped between the task and the store.
      const numbers = all.map((l) => l.line_number);
      expect(numbers).toEqual(numbers.map((_, i) => i + 1));
      expect(all.some((l) => /dropped/.test(l.message))).toBe(false);
    } finally {
      await sa.stop();
      s.cleanup();
    }
  }, 240_000);
});

describe('server-side log caps (issue 10 item 4)', () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  async function attempt(limits: Partial<LogLimits>) {
    h = await createHarness({ logLimits: { ...DEFAULT_LOG_LIMITS, ...limits } });
    await setupVaultAndDag(h);
    const launch = await startAttempt(h);
    const push = (first: number, messages: string[]) =>
      h!.agent(launch.token).pushLogs(
        create(PushLogsRequestSchema, {
          lines: messages.map((message, i) => ({
            lineNumber: BigInt(first + i),
            timeMs: BigInt(h!.clock.now()),
            stream: LogStream.STDOUT,
            message,
          })),
        }),
      );
    const read = () =>
      h!.store.readLogs(launch.identity.dag_run_id, 't', 1, 0, LOG_CAP_NOTE_LINE + 1);
    return { launch, push, read, h };
  }

  it('cuts a line longer than logs.max_line_bytes and says how many bytes it cut', async () => {
    const { push, read } = await attempt({ maxLineBytes: 100 });
    await push(1, ['x'.repeat(1000), 'short']);
    const lines = await read();
    expect(lines.map((l) => l.message)).toEqual([
      `${'x'.repeat(100)} …[line truncated by the server: 900 more bytes dropped (logs.max_line_bytes=100)]`,
      'short',
    ]);
  });

  it('stores up to logs.max_bytes_per_attempt, then one closing line with the exact count dropped and why', async () => {
    const { push, read } = await attempt({ maxBytesPerAttempt: 1000 });
    const line = 'y'.repeat(100);
    await push(
      1,
      Array.from({ length: 7 }, () => line),
    );
    await push(
      8,
      Array.from({ length: 7 }, () => line),
    );
    await push(
      15,
      Array.from({ length: 16 }, () => line),
    );
    const lines = await read();
    expect(lines.filter((l) => l.message === line).map((l) => l.line_number)).toEqual(
      Array.from({ length: 10 }, (_, i) => i + 1),
    );
    const last = lines[lines.length - 1]!;
    expect(last.line_number).toBe(LOG_CAP_NOTE_LINE);
    expect(last.message).toBe(
      "20 log lines (2000 bytes) dropped: this attempt's log reached logs.max_bytes_per_attempt " +
        '(1000 bytes); every line after that point was counted, not stored',
    );
    expect(lines).toHaveLength(11);
  });

  it('keeps counting across a control-plane restart (the budget is rebuilt from the store)', async () => {
    const { push, read, h: harness, launch } = await attempt({ maxBytesPerAttempt: 250 });
    await push(1, ['a'.repeat(100), 'b'.repeat(100), 'c'.repeat(100), 'd'.repeat(100)]);
    // A fresh process's budget for the same attempt.
    const budgets = new AttemptLogBudgets(harness.store, {
      ...DEFAULT_LOG_LIMITS,
      maxBytesPerAttempt: 250,
    });
    const identity = launch.identity;
    const row = (n: number) => ({
      tenant_id: identity.tenant_id,
      dag_run_id: identity.dag_run_id,
      task_id: identity.task_id,
      try_number: identity.try_number,
      line_number: n,
      time: 0,
      stream: 'stdout' as const,
      message: 'e',
    });
    const { keep, note } = await budgets.admit(identity, [row(5), row(6)], 0);
    expect(keep).toEqual([]);
    expect(note?.message).toMatch(/^4 log lines \(202 bytes\) dropped/);
    expect((await read()).map((l) => l.message.slice(0, 1))).toEqual(['a', 'b', '2']);
  });

  it('refuses log writes for an attempt that ended more than logs.write_grace ago, with FailedPrecondition', async () => {
    const { push, launch, read } = await attempt({ writeGraceMs: 60_000 });
    await report(h!, launch.token, 'success');
    h!.clock.advance(30_000);
    await push(1, ['late but within grace']);
    h!.clock.advance(31_000);
    const err = await push(2, ['too late']).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(err?.code).toBe(Code.FailedPrecondition);
    expect(err?.rawMessage).toBe(
      'log closed: the attempt ended more than 60s ago (logs.write_grace)',
    );
    expect((await read()).map((l) => l.message)).toEqual(['late but within grace']);
  });
});
