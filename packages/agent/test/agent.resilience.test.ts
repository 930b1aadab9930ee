import { describe, expect, it } from 'vitest';
import { Code } from '@connectrpc/connect';
import { LogStream, ReportedState } from '@leoflow/protocol';
import { defaultSpec, fail } from './support/fake-agent-service.js';
import { useHarness } from './support/harness.js';

const { runAgent } = useHarness();

describe('agent process: resilience', () => {
  it('loses no log lines while PushLogs is briefly unavailable', async () => {
    const { fake, code } = await runAgent({
      spec: defaultSpec({
        command: 'for i in $(seq 1 2000); do echo line-$i; done; sleep 0.3; echo done',
      }),
      pushLogs: (n) => {
        if (n <= 3) fail(Code.Unavailable);
      },
    });
    expect(code).toBe(0);
    const expected = [...Array.from({ length: 2000 }, (_, i) => `line-${i + 1}`), 'done'];
    expect(fake.lines(LogStream.STDOUT)).toEqual(expected);
    const numbers = fake.logLines.map((l) => Number(l.lineNumber));
    expect(numbers).toEqual(numbers.map((_, i) => i + 1)); // no gaps, no duplicates, in order
    expect(fake.count('PushLogs')).toBeGreaterThan(4);
    expect(fake.logLines.every((l) => l.stream !== LogStream.UNSPECIFIED)).toBe(true);
    // Batches are bounded.
    expect(Math.max(...fake.logBatches)).toBeLessThanOrEqual(2000);
  });

  it('loses nothing from a fast task during an outage: the task waits on its pipe instead', async () => {
    const { fake, code } = await runAgent({
      spec: defaultSpec({ command: 'seq 1 30000; sleep 0.2' }),
      pushLogs: (n) => {
        if (n <= 3) fail(Code.Unavailable);
      },
    });
    expect(code).toBe(0);
    const stdout = fake.lines(LogStream.STDOUT).map(Number);
    expect(stdout).toEqual(Array.from({ length: 30000 }, (_, i) => i + 1));
    expect(fake.lines(LogStream.AGENT).some((l) => l.includes('dropped'))).toBe(false);
    const numbers = fake.logLines.map((l) => Number(l.lineNumber));
    expect(numbers).toEqual(numbers.map((_, i) => i + 1));
  });

  it('retries ReportState with backoff until the control plane answers', async () => {
    const started = Date.now();
    const { fake, code } = await runAgent({
      spec: defaultSpec({ command: 'echo ok' }),
      reportState: (n) => {
        if (n <= 2) fail(Code.Unavailable);
      },
    });
    expect(code).toBe(0);
    expect(fake.count('ReportState')).toBe(3);
    expect(fake.reports).toHaveLength(1);
    expect(fake.reports[0]!.state).toBe(ReportedState.SUCCESS);
    const at = fake.callsOf('ReportState').map((c) => c.at);
    // 1 s then 2 s, each jittered over its upper half (retry.ts, jittered)
    expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(450);
    expect(at[2]! - at[1]!).toBeGreaterThanOrEqual(950);
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it('exits non-zero when the report cannot be delivered before LEOFLOW_REPORT_DEADLINE_MS', async () => {
    const { fake, code, diag } = await runAgent(
      { spec: defaultSpec({ command: 'echo ok' }), reportState: () => fail(Code.Unavailable) },
      { env: { LEOFLOW_REPORT_DEADLINE_MS: '1500' } },
    );
    expect(code).toBe(3);
    expect(fake.count('ReportState')).toBeGreaterThanOrEqual(2);
    expect(diag).toContain('could not deliver ReportState');
  });

  it('does not retry a report the server rejects outright', async () => {
    const { fake, code } = await runAgent({
      spec: defaultSpec({ command: 'echo ok' }),
      reportState: () => fail(Code.Unauthenticated, 'invalid agent token'),
    });
    expect(code).toBe(3);
    expect(fake.count('ReportState')).toBe(1);
  });

  it('exits when the report answer says should_terminate', async () => {
    const { fake, code } = await runAgent({
      spec: defaultSpec({ command: 'echo ok' }),
      reportState: () => ({ acknowledged: false, shouldTerminate: true }),
    });
    expect(code).toBe(0);
    expect(fake.count('ReportState')).toBe(1);
  });

  it('gives up when Register keeps failing past the bootstrap deadline', async () => {
    const started = Date.now();
    const { fake, code, diag } = await runAgent(
      { spec: defaultSpec(), register: () => fail(Code.Unavailable) },
      { env: { LEOFLOW_BOOTSTRAP_DEADLINE_MS: '1500' } },
    );
    expect(code).toBe(2);
    expect(Date.now() - started).toBeLessThan(6_000);
    expect(fake.count('Register')).toBeGreaterThanOrEqual(2);
    expect(fake.count('GetTaskSpec')).toBe(0);
    expect(diag).toContain('bootstrap failed: Register failed: Unavailable');
  });

  it('stops at once when the token is rejected at Register', async () => {
    const { fake, code } = await runAgent({
      spec: defaultSpec(),
      register: () => fail(Code.Unauthenticated),
    });
    expect(code).toBe(2);
    expect(fake.count('Register')).toBe(1);
  });

  it('exits when the token pipe is never closed or is empty', async () => {
    const held = await runAgent(
      { spec: defaultSpec() },
      { holdTokenPipe: true, env: { LEOFLOW_BOOTSTRAP_DEADLINE_MS: '800' } },
    );
    expect(held.code).toBe(2);
    expect(held.diag).toContain('token pipe (fd 3) not closed');
    expect(held.fake.calls).toHaveLength(0);

    const empty = await runAgent({ spec: defaultSpec() }, { token: ' \n' });
    expect(empty.code).toBe(2);
    expect(empty.diag).toContain('token pipe (fd 3) was empty');
  });
});
