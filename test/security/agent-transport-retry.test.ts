/**
 * Issue 10, item 5 (agent side): a control plane that dies mid-call must not make the agent give
 * up. A killed server's HTTP/2 streams end with RST_STREAM CANCEL, which Connect surfaces as
 * `Canceled`; the agent used to treat that as final and exit without reporting a task that had
 * succeeded. These tests cut real calls of the real agent process over real HTTP/2.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import { Code, ConnectError } from '@connectrpc/connect';
import { LogStream, ReportedState } from '@leoflow/protocol';
import { describe, expect, it } from 'vitest';
import { classifyFailure, isRetryable, retryUntil } from '../../packages/agent/src/retry.js';
import { staleSessionInterceptor } from '../../packages/agent/src/rpc.js';
import {
  defaultSpec,
  type FakeAgentService,
} from '../../packages/agent/test/support/fake-agent-service.js';
import { TOKEN, useHarness } from '../../packages/agent/test/support/harness.js';

const { startFake, start, tempDir } = useHarness();

/** A Node network error as Connect wraps it (code kept on the cause). */
function nodeFailure(code: Code, nodeCode: string): ConnectError {
  const cause = Object.assign(new Error(`socket: ${nodeCode}`), { code: nodeCode });
  const err = new ConnectError(`transport: ${nodeCode}`, code);
  err.cause = cause;
  return err;
}

describe('classification of failed agent calls', () => {
  it('retries Canceled from a dropped stream, and never a cancel the agent issued itself', () => {
    const dropped = new ConnectError(
      'http/2 stream closed with error code CANCEL (0x8)',
      Code.Canceled,
    );
    expect(classifyFailure(dropped)).toBe('transport');
    expect(isRetryable(dropped)).toBe(true);
    const own = new AbortController();
    own.abort();
    expect(
      classifyFailure(new ConnectError('operation was aborted', Code.Canceled), own.signal),
    ).toBe('own_cancel');
    expect(isRetryable(dropped, own.signal)).toBe(false);
  });

  it('treats refused, reset, GOAWAY and destroyed sessions as transport failures', () => {
    expect(classifyFailure(nodeFailure(Code.Unavailable, 'ECONNREFUSED'))).toBe('transport');
    expect(classifyFailure(nodeFailure(Code.Aborted, 'ECONNRESET'))).toBe('transport');
    expect(classifyFailure(nodeFailure(Code.Internal, 'ERR_HTTP2_GOAWAY_SESSION'))).toBe(
      'transport',
    );
    expect(classifyFailure(nodeFailure(Code.Internal, 'ERR_HTTP2_INVALID_SESSION'))).toBe(
      'transport',
    );
    expect(classifyFailure(nodeFailure(Code.Internal, 'EPIPE'))).toBe('transport');
    expect(classifyFailure(new ConnectError('refused stream', Code.Unavailable))).toBe('transport');
    expect(classifyFailure(new ConnectError('timed out', Code.DeadlineExceeded))).toBe('transport');
  });

  it('keeps server answers apart: transient codes retried, refusals final', () => {
    expect(classifyFailure(new ConnectError('busy', Code.ResourceExhausted))).toBe('transient');
    expect(classifyFailure(new ConnectError('bug', Code.Internal))).toBe('transient');
    for (const code of [
      Code.PermissionDenied,
      Code.Unauthenticated,
      Code.FailedPrecondition,
      Code.InvalidArgument,
      Code.NotFound,
      Code.Unimplemented,
    ]) {
      expect(classifyFailure(new ConnectError('no', code))).toBe('final');
    }
  });

  it('a fake client failing with every transport failure in turn is retried to success', async () => {
    const failures = [
      new ConnectError('http/2 stream closed with error code CANCEL (0x8)', Code.Canceled),
      nodeFailure(Code.Unavailable, 'ECONNREFUSED'),
      nodeFailure(Code.Aborted, 'ECONNRESET'),
      nodeFailure(Code.Internal, 'ERR_HTTP2_GOAWAY_SESSION'),
      new ConnectError('timed out', Code.DeadlineExceeded),
    ];
    let n = 0;
    const result = await retryUntil(
      async () => {
        const f = failures[n++];
        if (f) throw f;
        return 'delivered';
      },
      { deadline: Date.now() + 5_000, backoff: () => 1 },
    );
    expect(result).toBe('delivered');
    expect(n).toBe(failures.length + 1);
  });

  it('transport failures outlast the transient window; transient answers do not', async () => {
    let clock = 0;
    const now = () => clock;
    const backoff = () => 1; // real sleeps stay short; the fake clock moves 100 per retry
    let transportCalls = 0;
    await expect(
      retryUntil(
        async () => {
          transportCalls++;
          clock += 1;
          throw new ConnectError('dropped', Code.Canceled);
        },
        {
          deadline: 10_000,
          transientDeadline: 500,
          backoff,
          now,
          onRetry: () => void (clock += 100),
        },
      ),
    ).rejects.toMatchObject({ code: Code.Canceled });
    expect(clock).toBeGreaterThanOrEqual(10_000);
    expect(transportCalls).toBeGreaterThan(90);

    clock = 0;
    let transientCalls = 0;
    await expect(
      retryUntil(
        async () => {
          transientCalls++;
          throw new ConnectError('bug', Code.Internal);
        },
        {
          deadline: 10_000,
          transientDeadline: 500,
          backoff,
          now,
          onRetry: () => void (clock += 100),
        },
      ),
    ).rejects.toMatchObject({ code: Code.Internal });
    expect(clock).toBeLessThanOrEqual(600);
    expect(transientCalls).toBeLessThanOrEqual(6);
  });

  it('stops at once when the agent cancels its own calls', async () => {
    const own = new AbortController();
    let n = 0;
    await expect(
      retryUntil(
        async () => {
          n++;
          own.abort();
          throw new ConnectError('operation was aborted', Code.Canceled);
        },
        { deadline: Date.now() + 60_000, backoff: () => 10_000, signal: own.signal },
      ),
    ).rejects.toMatchObject({ code: Code.Canceled });
    expect(n).toBe(1);
  });

  it('drops a silent session when a call times out with no answer since it started', async () => {
    let aborted = 0;
    let t = 0;
    const guard = staleSessionInterceptor(
      () => aborted++,
      () => t,
    );
    const timeout = guard(async () => {
      t += 10;
      throw new ConnectError('timed out', Code.DeadlineExceeded);
    });
    const answered = guard(async () => {
      t += 1;
      return {} as never;
    });
    await expect(timeout({} as never)).rejects.toBeInstanceOf(ConnectError);
    expect(aborted).toBe(1);
    // An answer arriving while a slow call is in flight proves the session alive: no abort.
    const slow = guard(async () => {
      await answered({} as never);
      throw new ConnectError('timed out', Code.DeadlineExceeded);
    });
    await expect(slow({} as never)).rejects.toBeInstanceOf(ConnectError);
    expect(aborted).toBe(1);
  });
});

describe('the agent process across a control plane that dies and comes back (real HTTP/2)', () => {
  async function runAcrossOutage(
    script: (fake: () => FakeAgentService, outage: () => void) => Parameters<typeof startFake>[0],
  ) {
    let fakeRef: FakeAgentService | undefined;
    let back: Promise<void> | undefined;
    const outage = (): void => {
      const f = fakeRef!;
      f.goAway();
      back = new Promise((r) => setTimeout(r, 1_500)).then(() => f.comeBack());
    };
    const fake = await startFake(script(() => fakeRef!, outage));
    fakeRef = fake;
    const agent = start({
      url: fake.url,
      token: TOKEN,
      workdir: tempDir(),
      env: { LEOFLOW_REPORT_DEADLINE_MS: '30000', LEOFLOW_BOOTSTRAP_DEADLINE_MS: '30000' },
    });
    const exit = await agent.exited;
    await back;
    return { fake, code: exit.code, diag: agent.diagnostics() };
  }

  it('ReportState cut by the server dying is retried until it is back, and SUCCESS lands (agent exit 0)', async () => {
    const { fake, code, diag } = await runAcrossOutage((_f, outage) => ({
      spec: defaultSpec({ command: 'echo ok' }),
      reportState: (n) => {
        if (n === 1) {
          outage();
          throw new ConnectError('cut', Code.Internal);
        }
      },
    }));
    expect(diag).not.toMatch(/could not deliver/);
    expect(code).toBe(0);
    expect(fake.reports.map((r) => r.state)).toEqual([ReportedState.SUCCESS]);
    expect(fake.count('ReportState')).toBeGreaterThanOrEqual(2);
    // The session the agent used died with the server: it dialled a new one.
    expect(fake.sessionsOpened).toBeGreaterThanOrEqual(2);
  });

  it('the final PushLogs cut by the server dying is retried: every line lands and then the report', async () => {
    const { fake, code, diag } = await runAcrossOutage((_f, outage) => {
      let cut = false;
      return {
        spec: defaultSpec({ command: 'echo one; echo two' }),
        pushLogs: (_n, lines) => {
          if (!cut && lines.some((l) => /task exited with code 0/.test(l.message))) {
            cut = true;
            outage();
            throw new ConnectError('cut', Code.Internal);
          }
        },
      };
    });
    expect(diag).not.toMatch(/gave up shipping/);
    expect(code).toBe(0);
    expect(fake.lines(LogStream.STDOUT)).toEqual(['one', 'two']);
    expect(fake.lines(LogStream.AGENT).some((l) => /task exited with code 0/.test(l))).toBe(true);
    expect(fake.reports.map((r) => r.state)).toEqual([ReportedState.SUCCESS]);
  });

  it('Register cut by the server dying is retried within the bootstrap deadline and the task runs', async () => {
    const { fake, code } = await runAcrossOutage((_f, outage) => ({
      spec: defaultSpec({ command: 'echo ran' }),
      register: (n) => {
        if (n === 1) {
          outage();
          throw new ConnectError('cut', Code.Internal);
        }
      },
    }));
    expect(code).toBe(0);
    expect(fake.count('Register')).toBeGreaterThanOrEqual(2);
    expect(fake.lines(LogStream.STDOUT)).toEqual(['ran']);
    expect(fake.reports.map((r) => r.state)).toEqual([ReportedState.SUCCESS]);
  });

  it('a secret fetch cut by the server dying waits for it instead of running the task without secrets', async () => {
    const { fake, code } = await runAcrossOutage((_f, outage) => ({
      // printed reversed: the agent masks a delivered value in the log (issue 34), and the test
      // must still see that the task received it
      spec: defaultSpec({ command: 'echo "var=$(printf %s "$AIRFLOW_VAR_GREETING" | rev)"' }),
      variables: { greeting: 'hello' },
      getVariables: (n) => {
        if (n === 1) {
          outage();
          throw new ConnectError('cut', Code.Internal);
        }
      },
    }));
    expect(code).toBe(0);
    expect(fake.lines(LogStream.AGENT).filter((l) => /secret fetch refused/.test(l))).toEqual([]);
    expect(fake.lines(LogStream.STDOUT)).toEqual(['var=olleh']);
  });
});

/**
 * A TCP relay in front of the fake control plane. `blackhole()` silently stops relaying on every
 * connection open at that moment — no FIN, no RST, as when a host vanishes or a NAT entry is
 * dropped — while new connections are relayed normally.
 */
async function startRelay(target: string): Promise<{
  url: string;
  connections: () => number;
  blackhole: () => void;
  close: () => Promise<void>;
}> {
  const { hostname, port } = new URL(target);
  const pairs = new Set<{ client: Socket; upstream: Socket; dead: boolean }>();
  let accepted = 0;
  const server: Server = createServer((client) => {
    accepted++;
    const upstream = connect(Number(port), hostname);
    const pair = { client, upstream, dead: false };
    pairs.add(pair);
    client.on('data', (d) => {
      if (!pair.dead) upstream.write(d);
    });
    upstream.on('data', (d) => {
      if (!pair.dead) client.write(d);
    });
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${addr.port}`,
    connections: () => accepted,
    blackhole: () => {
      for (const p of pairs) p.dead = true;
    },
    close: async () => {
      for (const p of pairs) {
        p.client.destroy();
        p.upstream.destroy();
      }
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

describe('a connection that dies silently (real HTTP/2 through a relay)', () => {
  it('ReportState on a silent session times out once, the agent dials a new session, and SUCCESS lands', async () => {
    let relay: Awaited<ReturnType<typeof startRelay>> | undefined;
    const fake = await startFake({
      spec: defaultSpec({ command: 'echo ok' }),
      reportState: (n) => {
        // The answer to this first report never reaches the agent, nor does anything else on
        // that connection from now on.
        if (n === 1) relay!.blackhole();
      },
    });
    relay = await startRelay(fake.url);
    try {
      const started = Date.now();
      const agent = start({
        url: relay.url,
        token: TOKEN,
        workdir: tempDir(),
        env: { LEOFLOW_RPC_TIMEOUT_MS: '1000', LEOFLOW_REPORT_DEADLINE_MS: '8000' },
      });
      const { code } = await agent.exited;
      expect(agent.diagnostics()).not.toMatch(/could not deliver/);
      expect(code).toBe(0);
      expect(fake.count('ReportState')).toBeGreaterThanOrEqual(2);
      // Without dropping the session every retry would wait on the dead one until the keepalive
      // PING gave up (30 s + 10 s), far past this report deadline.
      expect(relay.connections()).toBeGreaterThanOrEqual(2);
      expect(Date.now() - started).toBeLessThan(8_000);
    } finally {
      await relay.close();
    }
  });
});
