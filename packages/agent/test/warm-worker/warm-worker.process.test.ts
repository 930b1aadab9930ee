import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Code, ConnectError } from '@connectrpc/connect';
import { LeoflowTokenScope, LogStream } from '@leoflow/protocol';
import { defaultSpec, type SpecInit } from '../support/fake-agent-service.js';
import { pidGone, waitFor } from '../support/spawn-agent.js';
import { AttemptIsolation, EXIT } from '../../src/index.js';
import { RECYCLE_MESSAGE, type WarmWorker } from '../../src/warm-worker/warm-worker.js';
import { warmWorkerMain } from '../../src/warm-worker/worker-main.js';
import { AssignmentQueue, PROJECTED, WORKER_TOKEN, useWorkerHarness } from './worker-support.js';

const isRoot = process.getuid?.() === 0;
if (!isRoot) {
  console.warn(
    `[warm worker process tests] the per-attempt uid cases are SKIPPED: they need root (uid 0); this run has uid ${process.getuid?.()}`,
  );
}

// ten uids of the default range's far end, apart from attempt-uid.process.test.ts's ten
const RANGE = { first: 1879113720, last: 1879113729 };
const ATTEMPT_RPCS = [
  'AckAssignment',
  'Register',
  'GetTaskSpec',
  'GetVariables',
  'GetConnections',
  'FetchXCom',
  'Heartbeat',
  'PushLogs',
  'ReportState',
  'PushXCom',
];
const { tempDir, startFake, startWorker, cleanups } = useWorkerHarness();

function uidEnv(dir: string): Record<string, string> {
  return {
    LEOFLOW_ATTEMPT_UID_RANGE: `${RANGE.first}-${RANGE.last}`,
    LEOFLOW_ATTEMPT_UID_LOCK_DIR: path.join(dir, 'uids'),
    // A warm pod has no mount namespace to give (PodSecurity); these cases also read the task's
    // host pid, which a PID namespace would hide: the per-uid fallback, as in a pod.
    LEOFLOW_SANDBOX_ISOLATION: 'fallback',
  };
}

/** The value of the first stdout line `<key>=<value>` the fake received, or undefined. */
function shipped(lines: string[], key: string, nth = 0): string | undefined {
  return lines.filter((l) => l.startsWith(`${key}=`)).map((l) => l.slice(key.length + 1))[nth];
}

describe('warm worker: bootstrap', () => {
  it('exchanges the projected token once and waits for work with the worker token, one free slot', async () => {
    const queue = new AssignmentQueue();
    const fake = await startFake({ spec: defaultSpec() }, queue);
    const dir = tempDir();
    // the projected volume as it should be mounted for a worker: 0400
    const worker = startWorker(fake.url, dir, uidEnv(dir), 0o400);
    await waitFor(() => fake.count('AwaitAssignment') >= 1, 10_000, 'AwaitAssignment');
    expect(fake.count('ExchangeToken')).toBe(1);
    expect(fake.callsOf('ExchangeToken')[0]!.authorization).toBeNull();
    expect(fake.callsOf('AwaitAssignment')[0]!.authorization).toBe(`Bearer ${WORKER_TOKEN}`);
    expect(queue.streams[0]!.freeSlots).toBe(1);
    worker.child.kill('SIGTERM');
    expect((await worker.exited).code).toBe(EXIT.OK);
    expect(fake.count('ExchangeToken')).toBe(1);
    expect(worker.diagnostics()).not.toContain(PROJECTED);
    expect(worker.diagnostics()).not.toContain(WORKER_TOKEN);
    expect(worker.diagnostics()).not.toContain('readable by other uids');
  });

  it('refuses an attempt-scoped answer: exit 2, the reason in the termination log, no AwaitAssignment', async () => {
    const queue = new AssignmentQueue();
    const fake = await startFake(
      { spec: defaultSpec(), exchangeScope: LeoflowTokenScope.ATTEMPT },
      queue,
    );
    const worker = startWorker(fake.url, tempDir());
    expect((await worker.exited).code).toBe(EXIT.BOOTSTRAP);
    expect(readFileSync(worker.terminationLog, 'utf8')).toContain(
      'answered a attempt-scoped token; this process needs a worker token',
    );
    expect(fake.count('ExchangeToken')).toBe(1);
    expect(fake.count('AwaitAssignment')).toBe(0);
  });

  it('a missing projected token file is a clear error in the termination log', async () => {
    const queue = new AssignmentQueue();
    const fake = await startFake({ spec: defaultSpec() }, queue);
    const dir = tempDir();
    const worker = startWorker(fake.url, dir, {
      LEOFLOW_EXCHANGE_TOKEN_FILE: path.join(dir, 'absent'),
    });
    expect((await worker.exited).code).toBe(EXIT.BOOTSTRAP);
    expect(readFileSync(worker.terminationLog, 'utf8')).toContain('could not be read (ENOENT)');
    expect(fake.count('ExchangeToken')).toBe(0);
  });

  it('reconnects while the server is away, and exits 6 once the worker token is refused', async () => {
    const queue = new AssignmentQueue();
    queue.onStream = (n) => {
      if (n === 1) throw new ConnectError('restarting', Code.Unavailable);
      throw new ConnectError('worker token expired', Code.Unauthenticated);
    };
    const fake = await startFake({ spec: defaultSpec() }, queue);
    const worker = startWorker(fake.url, tempDir());
    expect((await worker.exited).code).toBe(EXIT.WORKER_REFUSED);
    expect(fake.count('AwaitAssignment')).toBe(2);
    expect(fake.count('ExchangeToken')).toBe(1);
    expect(readFileSync(worker.terminationLog, 'utf8')).toContain('refused the worker token');
  });
});

describe.skipIf(!isRoot)('warm worker: two attempts on one pod', () => {
  it('renews the worker bearer from the stream, gives each attempt only its own token, kills what attempt 1 left and removes its work dir before attempt 2', async () => {
    const dir = tempDir();
    const queue = new AssignmentQueue();
    queue.assign('as-1', 'att1.tok.Q1');
    queue.assign('as-2', 'att2.tok.Q2');
    queue.onStream = (n) =>
      n === 1
        ? [
            {
              event: {
                case: 'workerToken',
                value: { token: 'renewed.worker.R2', expiresAtMs: 1n },
              },
            },
          ]
        : [];
    const specs: Record<string, SpecInit> = {
      'Bearer att1.tok.Q1': defaultSpec({
        taskInstanceId: 'ti-1',
        command:
          'echo "uid=$(id -u)"; echo "home=$HOME"; setsid nohup sleep 300 >/dev/null 2>&1 </dev/null & echo "bg=$!"',
      }),
      'Bearer att2.tok.Q2': defaultSpec({
        taskInstanceId: 'ti-2',
        command: 'echo "uid=$(id -u)"; echo "home=$HOME"; echo "pid=$$"; env; sleep 4',
      }),
    };
    // bearers GetTaskSpec saw that are no attempt's token (cut short: never a whole token)
    const strays: string[] = [];
    let beforeAttempt2: { bgGone: boolean; workdir1Gone: boolean } | undefined;
    const fake = await startFake(
      {
        spec: defaultSpec({ command: 'exit 99' }),
        specFor: (auth) => {
          const spec = auth ? specs[auth] : undefined;
          if (!spec) strays.push(auth ? auth.slice(0, 16) : '(none)');
          return spec;
        },
        variablesFor: (auth) =>
          auth === 'Bearer att2.tok.Q2' ? { secret: 's3cret-of-attempt-2' } : undefined,
        register: (n) => {
          if (n !== 2) return;
          const out = fake.lines(LogStream.STDOUT);
          beforeAttempt2 = {
            bgGone: pidGone(Number(shipped(out, 'bg'))),
            workdir1Gone: !existsSync(shipped(out, 'home') ?? '/'),
          };
        },
      },
      queue,
    );
    const worker = startWorker(fake.url, dir, uidEnv(dir));
    await waitFor(
      () => {
        if (strays.length > 0) throw new Error(`GetTaskSpec carried ${strays.join(', ')}`);
        return shipped(fake.lines(LogStream.STDOUT), 'pid') !== undefined;
      },
      20_000,
      "attempt 2's task",
    );
    const out = fake.lines(LogStream.STDOUT);
    const [uid1, uid2] = [Number(shipped(out, 'uid')), Number(shipped(out, 'uid', 1))];
    const pid2 = Number(shipped(out, 'pid'));
    // (d) attempt 1's uid, the one its detached process ran as, cannot read attempt 2's env
    const asAttempt1 = spawnSync('cat', [`/proc/${pid2}/environ`], { uid: uid1, gid: uid1 });
    const asRoot = spawnSync('cat', [`/proc/${pid2}/environ`]);
    expect(asAttempt1.status).not.toBe(0);
    expect(asRoot.stdout.toString()).toContain('AIRFLOW_VAR_SECRET=s3cret-of-attempt-2');

    await waitFor(() => fake.reports.length === 2, 20_000, "attempt 2's report");
    worker.child.kill('SIGTERM');
    expect((await worker.exited).code).toBe(EXIT.OK);

    // the token file here is 0644, as a projected volume's default mode
    expect(worker.diagnostics()).toContain('is readable by other uids');
    // (d, f) before attempt 2's Register (so before its task): attempt 1's leftovers are gone
    expect(beforeAttempt2).toEqual({ bgGone: true, workdir1Gone: true });
    expect(uid1).toBeGreaterThanOrEqual(RANGE.first);
    expect(uid2).toBeGreaterThanOrEqual(RANGE.first);
    expect(uid2).not.toBe(uid1);
    expect(shipped(out, 'home', 1)).not.toBe(shipped(out, 'home'));

    // (b) the renewal pushed on stream 1 is the bearer of the next AwaitAssignment
    const waits = fake.callsOf('AwaitAssignment').map((c) => c.authorization);
    expect(waits[0]).toBe(`Bearer ${WORKER_TOKEN}`);
    expect(waits.slice(1).length).toBeGreaterThanOrEqual(1);
    for (const w of waits.slice(1)) expect(w).toBe('Bearer renewed.worker.R2');
    // The stream an attempt came on stays open while it runs; a new one opens once it is over.
    expect(queue.streams.map((s) => s.freeSlots).slice(0, 2)).toEqual([1, 1]);
    expect(fake.count('ExchangeToken')).toBe(1);

    // (c) every attempt call carries its own attempt's token; none the worker's
    const attemptCalls = fake.calls.filter((c) => ATTEMPT_RPCS.includes(c.method));
    expect(attemptCalls.length).toBeGreaterThan(8);
    for (const c of attemptCalls) {
      expect(['Bearer att1.tok.Q1', 'Bearer att2.tok.Q2']).toContain(c.authorization);
    }
    const firstOf2 = attemptCalls.findIndex((c) => c.authorization === 'Bearer att2.tok.Q2');
    expect(firstOf2).toBeGreaterThan(0);
    expect(
      attemptCalls.slice(firstOf2).every((c) => c.authorization === 'Bearer att2.tok.Q2'),
    ).toBe(true);
    expect(fake.reports.map((r) => r.exitCode)).toEqual([0, 0]);
    // …and attempt 2's task env holds neither token nor the worker's own settings
    const env = out.join('\n');
    for (const secret of [
      WORKER_TOKEN,
      'renewed.worker.R2',
      'att1.tok.Q1',
      'att2.tok.Q2',
      PROJECTED,
    ]) {
      expect(env).not.toContain(secret);
    }
    expect(env).not.toMatch(/LEOFLOW_(WARM_WORKER|AGENT_URL|EXCHANGE_TOKEN_FILE|WORKDIR)/);
  }, 60_000);
});

/** A worker in this process, with the seams that make a survivor visible. */
async function inProcessWorker(
  dir: string,
  url: string,
  overrides: Parameters<typeof warmWorkerMain>[0]['overrides'],
) {
  const { writeFileSync } = await import('node:fs');
  const tokenFile = path.join(dir, 'sa-token');
  writeFileSync(tokenFile, PROJECTED);
  let worker: WarmWorker | undefined;
  const diag: string[] = [];
  const terminationLog = path.join(dir, 'termination-log');
  const code = warmWorkerMain({
    env: {
      PATH: process.env['PATH'],
      LEOFLOW_AGENT_URL: url,
      LEOFLOW_EXCHANGE_TOKEN_FILE: tokenFile,
      LEOFLOW_TERMINATION_LOG: terminationLog,
      LEOFLOW_WORKDIR: path.join(dir, 'work'),
      LEOFLOW_KILL_GRACE_MS: '500',
      ...uidEnv(dir),
    },
    diag: { log: (level, m) => diag.push(`${level} ${m}`) },
    onWorker: (w) => (worker = w),
    overrides,
  });
  // a test that fails half way must not leave the worker (and its task) running
  cleanups.push(async () => {
    worker?.stop();
    await code;
  });
  return { code, diag, terminationLog, stop: () => worker?.stop() };
}

describe('warm worker: a survivor recycles the pod', () => {
  const twoQueued = () => {
    const queue = new AssignmentQueue();
    queue.assign('as-1', 'att1.tok.Q1');
    queue.assign('as-2', 'att2.tok.Q2');
    return queue;
  };

  it.skipIf(!isRoot)(
    "(e) the attempt's isolation reports a survivor: no further assignment, exit 5",
    async () => {
      const dir = tempDir();
      const queue = twoQueued();
      const fake = await startFake({ spec: defaultSpec({ command: 'true' }) }, queue);
      class Leaky extends AttemptIsolation {
        override async end(): Promise<boolean> {
          await super.end();
          return false;
        }
      }
      const w = await inProcessWorker(dir, fake.url, {
        isolationFor: (s) => new Leaky(s),
        sweepDescendants: () => Promise.resolve([]),
      });
      expect(await w.code).toBe(EXIT.RECYCLE);
      expect(readFileSync(w.terminationLog, 'utf8').trim()).toBe(RECYCLE_MESSAGE);
      expect(fake.count('AckAssignment')).toBe(1);
      expect(fake.reports).toHaveLength(1);
      expect(queue.streams.filter((s) => s.freeSlots > 0)).toHaveLength(1);
      expect(queue.pending).toHaveLength(1);
    },
    30_000,
  );

  it('a descendant of the worker that survived the sweep also recycles it (the non-root path)', async () => {
    const dir = tempDir();
    const queue = twoQueued();
    const fake = await startFake({ spec: defaultSpec({ command: 'true' }) }, queue);
    const w = await inProcessWorker(dir, fake.url, {
      sweepDescendants: () => Promise.resolve([4242]),
    });
    expect(await w.code).toBe(EXIT.RECYCLE);
    expect(readFileSync(w.terminationLog, 'utf8').trim()).toBe(RECYCLE_MESSAGE);
    expect(w.diag.join('\n')).toContain('processes 4242 survived SIGKILL');
    expect(fake.count('AckAssignment')).toBe(1);
    expect(queue.pending).toHaveLength(1);
  }, 30_000);

  it('with nothing left over, the same worker takes the next assignment (the live side)', async () => {
    const dir = tempDir();
    const queue = twoQueued();
    const fake = await startFake({ spec: defaultSpec({ command: 'true' }) }, queue);
    const w = await inProcessWorker(dir, fake.url, {
      sweepDescendants: () => Promise.resolve([]),
    });
    await waitFor(() => fake.reports.length === 2, 20_000, 'two reports');
    w.stop();
    expect(await w.code).toBe(EXIT.OK);
    expect(fake.count('AckAssignment')).toBe(2);
    expect(existsSync(w.terminationLog)).toBe(false);
  }, 30_000);
});

describe('warm worker: cancellation', () => {
  it('an AssignmentCancellation on the stream stops the running attempt; the worker then takes the next one', async () => {
    const dir = tempDir();
    const queue = new AssignmentQueue();
    queue.assign('as-1', 'att1.tok.Q1');
    queue.assign('as-2', 'att2.tok.Q2');
    // the stream attempt 1 came on, still open while it runs, carries its cancellation
    queue.afterAssignment = (n) => ({
      delayMs: n === 1 ? 500 : 0,
      events:
        n === 1
          ? [
              {
                event: { case: 'cancellation', value: { assignmentId: 'as-1', reason: 'revoked' } },
              },
            ]
          : [],
    });
    const fake = await startFake(
      {
        spec: defaultSpec({ command: 'true' }),
        specFor: (auth) =>
          auth === 'Bearer att1.tok.Q1' ? defaultSpec({ command: 'sleep 60' }) : undefined,
      },
      queue,
    );
    const startedAt = Date.now();
    const w = await inProcessWorker(dir, fake.url, {
      sweepDescendants: () => Promise.resolve([]),
    });
    await waitFor(() => fake.count('AckAssignment') === 2, 20_000, "attempt 2's ack");
    await waitFor(() => fake.reports.some((r) => r.exitCode === 0), 20_000, "attempt 2's report");
    expect(Date.now() - startedAt).toBeLessThan(20_000);
    w.stop();
    expect(await w.code).toBe(EXIT.OK);
  }, 40_000);
});
