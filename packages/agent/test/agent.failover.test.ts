/**
 * Issue 39: an agent follows the control plane, not one replica. LEOFLOW_AGENT_URL may name every
 * replica's agent URL; when the one an agent talks to dies, its next calls (heartbeats, logs, the
 * report) go to another, under the same token and session key. Real agent processes over real
 * HTTP/2 against two fake control planes.
 */
import { Code, ConnectError } from '@connectrpc/connect';
import { LogStream, ReportedState } from '@leoflow/protocol';
import { describe, expect, it } from 'vitest';
import { AgentEndpoints, parseAgentUrls } from '../src/endpoints.js';
import { readConfig } from '../src/config.js';
import { defaultSpec, type FakeAgentService, type Script } from './support/fake-agent-service.js';
import { TOKEN, useHarness } from './support/harness.js';

const { startFake, start, tempDir } = useHarness();

describe('LEOFLOW_AGENT_URL as a list', () => {
  it('takes one URL or several, comma-separated, and refuses an item that is not http(s)', () => {
    const base = { LEOFLOW_TASK_INSTANCE_ID: 'ti', LEOFLOW_WORKDIR: '/w' };
    expect(readConfig({ ...base, LEOFLOW_AGENT_URL: 'http://a:1' }).agentUrl).toBe('http://a:1');
    expect(
      readConfig({ ...base, LEOFLOW_AGENT_URL: ' http://a:1, https://b:2 ,http://a:1,' }).agentUrl,
    ).toBe('http://a:1,https://b:2');
    expect(() => readConfig({ ...base, LEOFLOW_AGENT_URL: 'http://a:1,ftp://b:2' })).toThrow(
      /must be http:\/\/ \(h2c\) or https:\/\/ URLs, got ftp:/,
    );
    expect(() => readConfig({ ...base, LEOFLOW_AGENT_URL: 'http://a:1,b:2' })).toThrow(
      /must be http/,
    );
    expect(() => readConfig({ ...base, LEOFLOW_AGENT_URL: ' , ' })).toThrow(/names no URL/);
  });

  it('moves on once per failed endpoint: a burst of failures of calls through one replica never skips a live one', () => {
    const switches: string[] = [];
    const e = new AgentEndpoints(parseAgentUrls('http://a:1,http://b:2,http://c:3'), {
      onSwitch: (from, to) => switches.push(`${from} -> ${to}`),
    });
    const a = e.current;
    // five calls in flight on A fail together
    for (let i = 0; i < 5; i++) e.failed(a, 'gone');
    expect(e.current.url).toBe('http://b:2');
    // a warm worker leaving A after its stream broke: A is no longer current, nothing moves
    e.moveOn('stream lost', a);
    expect(e.current.url).toBe('http://b:2');
    e.moveOn('not the leader');
    expect(e.current.url).toBe('http://c:3');
    e.failed(e.current, 'gone');
    expect(e.current.url).toBe('http://a:1');
    expect(switches).toEqual([
      'http://a:1 -> http://b:2',
      'http://b:2 -> http://c:3',
      'http://c:3 -> http://a:1',
    ]);
    e.close();
    // one URL: nothing to move to, and nothing is logged
    const one = new AgentEndpoints(['http://a:1'], { onSwitch: () => switches.push('x') });
    one.failed(one.current, 'gone');
    one.moveOn('again');
    expect(one.current.url).toBe('http://a:1');
    expect(switches).toHaveLength(3);
    one.close();
  });
});

describe('an agent whose replica dies carries on with another URL of the list (real HTTP/2)', () => {
  /** Replica A registers the attempt and dies at its first heartbeat; B never saw the agent. */
  async function failover(scriptA: (a: () => FakeAgentService) => Partial<Script>) {
    const spec = defaultSpec({ command: 'echo one; sleep 1; echo two' });
    let aRef: FakeAgentService | undefined;
    const a = await startFake({ spec, ...scriptA(() => aRef!) });
    aRef = a;
    const b = await startFake({ spec });
    const agent = start({
      url: `${a.url},${b.url}`,
      token: TOKEN,
      workdir: tempDir(),
      env: {
        LEOFLOW_HEARTBEAT_INTERVAL_MS: '200',
        LEOFLOW_REPORT_DEADLINE_MS: '30000',
        LEOFLOW_BOOTSTRAP_DEADLINE_MS: '30000',
      },
    });
    const exit = await agent.exited;
    return { a, b, code: exit.code, diag: agent.diagnostics() };
  }

  it('heartbeats, log lines and the report land on B after A is gone for good; no line is lost or doubled', async () => {
    const { a, b, code, diag } = await failover((a) => ({
      heartbeat: (n) => {
        if (n === 1) {
          a().goAway(); // and never comes back
          throw new ConnectError('cut', Code.Internal);
        }
      },
    }));
    expect(code).toBe(0);
    expect(a.count('Register')).toBe(1);
    expect(b.count('Register')).toBe(0);
    expect(a.reports).toEqual([]);
    expect(b.reports.map((r) => r.state)).toEqual([ReportedState.SUCCESS]);
    expect(b.count('Heartbeat')).toBeGreaterThanOrEqual(1);
    // every stdout line exactly once, across the two replicas, in order
    expect([...a.lines(LogStream.STDOUT), ...b.lines(LogStream.STDOUT)]).toEqual(['one', 'two']);
    expect(b.calls.every((c) => c.authorization === `Bearer ${TOKEN}`)).toBe(true);
    expect(diag).toMatch(
      new RegExp(`control plane at ${a.url} unreachable; next calls go to ${b.url}`),
    );
  }, 60_000);

  it('with one URL the agent keeps dialling it (no list, no switch), as before', async () => {
    const spec = defaultSpec({ command: 'echo only' });
    const a = await startFake({ spec });
    const agent = start({ url: a.url, token: TOKEN, workdir: tempDir() });
    const exit = await agent.exited;
    expect(exit.code).toBe(0);
    expect(a.reports.map((r) => r.state)).toEqual([ReportedState.SUCCESS]);
    expect(agent.diagnostics()).not.toMatch(/next calls go to/);
  });
});
