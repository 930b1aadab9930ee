import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { Code, ConnectError } from '@connectrpc/connect';
import { takeEnvToken } from '../src/token.js';
import {
  backoffMs,
  buildTaskEnv,
  ConfigError,
  exitCodeOf,
  LineSplitter,
  LogShipper,
  readConfig,
  retryUntil,
  silentDiagnostics,
  stripAgentOnly,
  TokenHolder,
  utf8Boundary,
  xcomEnvName,
  type BufferedLine,
} from '../src/index.js';

describe('stripAgentOnly', () => {
  it('keeps exactly the allowlisted LEOFLOW_ names and everything else (reference T80)', () => {
    const out = stripAgentOnly({
      LEOFLOW_AGENT_TOKEN: 'x',
      LEOFLOW_CONTROL_PLANE_ADDR: 'y',
      LEOFLOW_AGENT_TOKEN_PATH: 'p',
      LEOFLOW_STAGING_DIR: '/staging',
      LEOFLOW_TASK_INSTANCE_ID: 'ti-1',
      PATH: '/bin',
      MY_VAR: '1',
    });
    expect(Object.keys(out).sort()).toEqual([
      'LEOFLOW_STAGING_DIR',
      'LEOFLOW_TASK_INSTANCE_ID',
      'MY_VAR',
      'PATH',
    ]);
  });

  it('matches the prefix case-insensitively but the allowlist exactly', () => {
    const out = stripAgentOnly({
      leoflow_agent_url: 'u',
      Leoflow_Workdir: 'w',
      leoflow_staging_dir: 's',
      X: undefined,
    });
    expect(out).toEqual({});
  });
});

describe('buildTaskEnv', () => {
  const spec = {
    env: {
      A: 'author',
      LEOFLOW_X: 'no',
      leoflow_y: 'no',
      AIRFLOW_CTX_DAG_ID: 'spoofed',
      'BAD=NAME': 'v',
      NUL: 'a\0b',
    },
    dagId: 'd',
    runId: 'r',
    taskId: 't',
    tryNumber: 3,
    logicalDate: '',
    dataIntervalStart: '',
    dataIntervalEnd: '',
    paramsJson: '',
    confJson: '',
  };

  it('layers agent env < author env < runtime context < secrets', () => {
    const { env, dropped } = buildTaskEnv({
      agentEnv: { PATH: '/bin', A: 'agent', LEOFLOW_WORKDIR: '/w', HOME: '/root' },
      spec,
      workdir: '/work/attempt',
      xcomDir: '/work/attempt/xcom',
      xcomEnv: { LEOFLOW_XCOM_UP: 'v' },
      variables: { k: 'secret-v', 'bad\0': 'x' },
      connections: { my_db: 'postgres://h' },
    });
    expect(env).toEqual({
      PATH: '/bin',
      A: 'author',
      AIRFLOW_CTX_DAG_ID: 'd',
      AIRFLOW_CTX_DAG_RUN_ID: 'r',
      AIRFLOW_CTX_TASK_ID: 't',
      AIRFLOW_CTX_TRY_NUMBER: '3',
      LEOFLOW_RUN_ID: 'r',
      LEOFLOW_RUN_CONF: '{}',
      LEOFLOW_PARAMS: '{}',
      LEOFLOW_XCOM_DIR: '/work/attempt/xcom',
      LEOFLOW_XCOM_UP: 'v',
      HOME: '/work/attempt',
      AIRFLOW_VAR_K: 'secret-v',
      AIRFLOW_CONN_MY_DB: 'postgres://h',
    });
    // Author names are reported; secret names are not.
    expect(dropped).toEqual(['BAD=NAME', 'NUL', '(a secret entry)']);
  });

  it('runs without secrets when the fetches were refused', () => {
    const { env } = buildTaskEnv({
      agentEnv: {},
      spec,
      workdir: '/w',
      xcomDir: '/w/xcom',
      xcomEnv: {},
      variables: undefined,
      connections: undefined,
    });
    expect(
      Object.keys(env).some((k) => k.startsWith('AIRFLOW_VAR_') || k.startsWith('AIRFLOW_CONN_')),
    ).toBe(false);
  });

  it('names upstream XCom env vars predictably', () => {
    expect(xcomEnvName('extract')).toBe('LEOFLOW_XCOM_EXTRACT');
    expect(xcomEnvName('load-to.bq')).toBe('LEOFLOW_XCOM_LOAD_TO_BQ');
    expect(xcomEnvName('ünï')).toBe('LEOFLOW_XCOM__N_');
  });
});

describe('LineSplitter', () => {
  const split = (chunks: Array<string | Buffer>, max?: number): string[] => {
    const out: string[] = [];
    const s = new LineSplitter((l) => out.push(l), max);
    for (const c of chunks) s.push(typeof c === 'string' ? Buffer.from(c) : c);
    s.end();
    return out;
  };

  it('joins partial lines across chunks, strips CRLF, keeps empty lines', () => {
    expect(split(['a', 'b\r', '\nc\n\n', 'd\r\ne'])).toEqual(['ab', 'c', '', 'd', 'e']);
  });

  it('reassembles a multi-byte character split across chunks', () => {
    const b = Buffer.from('€\n');
    expect(split([b.subarray(0, 1), b.subarray(1, 2), b.subarray(2)])).toEqual(['€']);
  });

  it('truncates an over-long line at a character boundary with a marker, without buffering it', () => {
    const out = split(['ab€€', '€€€', 'xyz\nnext\n'], 7);
    expect(out).toEqual(['ab€ …[line truncated: 15 more bytes dropped]', 'next']);
  });

  it('emits nothing for an empty stream', () => {
    expect(split([])).toEqual([]);
  });

  it('finds UTF-8 boundaries', () => {
    const e = Buffer.from('a€');
    expect(utf8Boundary(e)).toBe(4);
    expect(utf8Boundary(e.subarray(0, 3))).toBe(1);
    expect(utf8Boundary(e.subarray(0, 2))).toBe(1);
    expect(utf8Boundary(Buffer.from('abc'))).toBe(3);
  });
});

describe('LogShipper', () => {
  const make = (
    push: (l: BufferedLine[]) => Promise<void>,
    more: Partial<ConstructorParameters<typeof LogShipper>[0]> = {},
  ) => new LogShipper({ push, diag: silentDiagnostics, batchSize: 3, ...more });

  it('numbers lines 1.. across streams and sends bounded batches in order', async () => {
    const seen: BufferedLine[][] = [];
    const s = make(async (b) => void seen.push(b));
    s.add('stdout', 'a');
    s.add('stderr', 'b');
    s.add('agent', 'c');
    s.add('stdout', 'd');
    expect(await s.drain(Date.now() + 1000)).toBe(true);
    expect(seen.map((b) => b.map((l) => `${l.lineNumber}:${l.stream}:${l.message}`))).toEqual([
      ['1:stdout:a', '2:stderr:b', '3:agent:c'],
      ['4:stdout:d'],
    ]);
  });

  it('bounds a batch by bytes as well as lines', async () => {
    const seen: number[] = [];
    const s = make(async (b) => void seen.push(b.length), { batchSize: 100, batchBytes: 10 });
    for (let i = 0; i < 7; i++) s.add('stdout', 'abcd');
    expect(await s.drain(Date.now() + 1000)).toBe(true);
    expect(seen).toEqual([2, 2, 2, 1]);
  });

  it('keeps lines across failures and resends them unchanged', async () => {
    let calls = 0;
    const got: number[] = [];
    const s = make(async (b) => {
      if (++calls <= 2) throw new ConnectError('down', Code.Unavailable);
      got.push(...b.map((l) => l.lineNumber));
    });
    for (let i = 0; i < 5; i++) s.add('stdout', `l${i}`);
    expect(await s.drain(Date.now() + 5_000)).toBe(true);
    expect(got).toEqual([1, 2, 3, 4, 5]);
  });

  it('never drops a line while the server is away: it asks for backpressure instead', async () => {
    let up = false;
    const got: BufferedLine[] = [];
    const pressure: boolean[] = [];
    const s = make(
      async (b) => {
        if (!up) throw new ConnectError('down', Code.Unavailable);
        got.push(...b);
      },
      { highWaterLines: 4, onPressure: (p) => pressure.push(p) },
    );
    for (let i = 1; i <= 10; i++) s.add('stdout', `l${i}`);
    expect(s.pending).toBe(10);
    expect(s.blocked).toBe(true);
    expect(pressure).toEqual([true]);
    expect(await s.flush()).toBe(false);
    up = true;
    expect(await s.drain(Date.now() + 5_000)).toBe(true);
    expect(got.map((l) => l.message)).toEqual(Array.from({ length: 10 }, (_, i) => `l${i + 1}`));
    expect(got.map((l) => l.lineNumber)).toEqual(Array.from({ length: 10 }, (_, i) => i + 1));
    // Released once below the low-water mark (half of 4), not before.
    expect(pressure).toEqual([true, false]);
    expect(s.discarded).toBe(0);
  });

  it('pauses at the byte high-water mark and resumes below half of it, pushing back to back', async () => {
    const pressure: { p: boolean; pending: number }[] = [];
    let release: () => void = () => undefined;
    const pushes: number[] = [];
    let hold = true;
    const s = make(
      (b) => {
        pushes.push(b.length);
        return hold ? new Promise<void>((r) => (release = r)) : Promise.resolve();
      },
      {
        batchSize: 4,
        highWaterLines: 1000,
        highWaterBytes: 50,
        onPressure: (p) => pressure.push({ p, pending: s.pending }),
      },
    );
    s.start();
    try {
      for (let i = 0; i < 10; i++) s.add('stdout', '0123456789'); // 10 bytes each
      expect(pressure).toEqual([{ p: true, pending: 5 }]);
      expect(pushes).toEqual([4]); // the first full batch went out at once
      release();
      await new Promise((r) => setImmediate(r));
      // 6 lines (60 bytes) left: still blocked, so the next push follows immediately.
      expect(pushes).toEqual([4, 4]);
      release();
      await new Promise((r) => setImmediate(r));
      // 2 lines (20 bytes) left: below half of 50, released.
      expect(pressure.map((x) => x.p)).toEqual([true, false]);
      hold = false;
      expect(await s.drain(Date.now() + 1000)).toBe(true);
      expect(pushes).toEqual([4, 4, 2]);
    } finally {
      s.stop();
    }
  });

  it('stops on FailedPrecondition (log closed), releases the task and counts every discarded line exactly', async () => {
    let calls = 0;
    const pressure: boolean[] = [];
    const s = make(
      async () => {
        calls++;
        throw new ConnectError('log closed', Code.FailedPrecondition);
      },
      { highWaterLines: 3, onPressure: (p) => pressure.push(p) },
    );
    for (let i = 0; i < 5; i++) s.add('stdout', `x${i}`);
    expect(await s.drain(Date.now() + 10_000)).toBe(false);
    expect(calls).toBe(1);
    expect(pressure).toEqual([true, false]);
    expect(s.discarded).toBe(5);
    s.add('stdout', 'after');
    s.add('agent', 'after too');
    expect(s.discarded).toBe(7);
    expect(await s.flush()).toBe(false);
    expect(calls).toBe(1);
  });

  it('stops draining on a non-retryable code', async () => {
    let calls = 0;
    const s = make(async () => {
      calls++;
      throw new ConnectError('no', Code.PermissionDenied);
    });
    s.add('stdout', 'x');
    expect(await s.drain(Date.now() + 10_000)).toBe(false);
    expect(calls).toBe(1);
  });
});

describe('retry', () => {
  it('backs off 1, 2, 4, 8, then 15 s', () => {
    expect([0, 1, 2, 3, 4, 5, 9].map(backoffMs)).toEqual([
      1000, 2000, 4000, 8000, 15000, 15000, 15000,
    ]);
  });

  it('retries transient codes and stops at the first permanent one', async () => {
    let n = 0;
    await expect(
      retryUntil(
        async () => {
          n++;
          throw new ConnectError('x', n < 3 ? Code.Unavailable : Code.PermissionDenied);
        },
        { deadline: Date.now() + 5_000, backoff: () => 1 },
      ),
    ).rejects.toMatchObject({ code: Code.PermissionDenied });
    expect(n).toBe(3);
  });

  it('gives up at the deadline', async () => {
    let n = 0;
    const start = Date.now();
    await expect(
      retryUntil(
        async () => {
          n++;
          throw new ConnectError('x', Code.DeadlineExceeded);
        },
        { deadline: start + 120, backoff: () => 50 },
      ),
    ).rejects.toMatchObject({ code: Code.DeadlineExceeded });
    expect(Date.now() - start).toBeLessThan(1_000);
    expect(n).toBeGreaterThanOrEqual(2);
  });
});

describe('readConfig', () => {
  const base = {
    LEOFLOW_AGENT_URL: 'http://127.0.0.1:8793',
    LEOFLOW_TASK_INSTANCE_ID: 'ti',
    LEOFLOW_WORKDIR: '/w',
  };

  it('applies defaults', () => {
    const c = readConfig(base, '/usr/bin/node');
    expect(c).toMatchObject({
      heartbeatIntervalMs: 15_000,
      heartbeatIntervalFromEnv: false,
      python: 'python3',
      node: '/usr/bin/node',
      reportDeadlineMs: 900_000,
      bootstrapDeadlineMs: 60_000,
      killGraceMs: 5_000,
      runAs: undefined,
    });
  });

  it('reads overrides and the run-as pair', () => {
    const c = readConfig({
      ...base,
      LEOFLOW_HEARTBEAT_INTERVAL_MS: '500',
      LEOFLOW_RUN_AS_UID: '1000',
      LEOFLOW_RUN_AS_GID: '100',
      LEOFLOW_PYTHON: '/opt/py/bin/python',
    });
    expect(c.heartbeatIntervalMs).toBe(500);
    expect(c.heartbeatIntervalFromEnv).toBe(true);
    expect(c.runAs).toEqual({ uid: 1000, gid: 100 });
    expect(c.python).toBe('/opt/py/bin/python');
  });

  it.each([
    [{ LEOFLOW_AGENT_URL: undefined }, /LEOFLOW_AGENT_URL is required/],
    [{ LEOFLOW_AGENT_URL: 'ftp://x' }, /http:\/\/ \(h2c\) or https/],
    [{ LEOFLOW_HEARTBEAT_INTERVAL_MS: '15s' }, /not a positive integer/],
    [{ LEOFLOW_RUN_AS_GID: '0' }, /must be set together/],
    [{ LEOFLOW_RUN_AS_UID: 'nobody', LEOFLOW_RUN_AS_GID: '1' }, /not a numeric id/],
  ])('rejects %o', (patch, msg) => {
    expect(() => readConfig({ ...base, ...patch })).toThrow(ConfigError);
    expect(() => readConfig({ ...base, ...patch })).toThrow(msg);
  });
});

describe('TokenHolder', () => {
  it('swaps on a non-empty renewal only and never prints the token', () => {
    const t = new TokenHolder('secret-a');
    expect(t.swap('')).toBe(false);
    expect(t.swap('  ')).toBe(false);
    expect(t.current()).toBe('secret-a');
    expect(t.swap('secret-b\n')).toBe(true);
    expect(t.current()).toBe('secret-b');
    expect(JSON.stringify({ t })).not.toContain('secret');
    expect(inspect({ t })).not.toContain('secret');
    expect(`${t as unknown as string}`).not.toContain('secret');
  });
});

describe('exitCodeOf', () => {
  it('follows the shell conventions', () => {
    expect(exitCodeOf({ code: 2, signal: null })).toBe(2);
    expect(exitCodeOf({ code: null, signal: 'SIGKILL' })).toBe(137);
    expect(exitCodeOf({ code: null, signal: null, spawnError: 'ENOENT' })).toBe(127);
    expect(exitCodeOf({ code: null, signal: null, spawnError: 'EACCES' })).toBe(126);
  });
});

describe('takeEnvToken (the Kubernetes envvar transport)', () => {
  it('takes the token out of the environment, trimmed, so nothing the agent starts inherits it', () => {
    const env: Record<string, string | undefined> = { LEOFLOW_AGENT_TOKEN: ' tok\n', PATH: '/bin' };
    expect(takeEnvToken(env)).toBe('tok');
    expect(env).toEqual({ PATH: '/bin' });
  });
  it('is undefined when absent or empty (the fd 3 pipe then), and still removes an empty one', () => {
    expect(takeEnvToken({ PATH: '/bin' })).toBeUndefined();
    const env: Record<string, string | undefined> = { LEOFLOW_AGENT_TOKEN: '  ' };
    expect(takeEnvToken(env)).toBeUndefined();
    expect('LEOFLOW_AGENT_TOKEN' in env).toBe(false);
  });
});
