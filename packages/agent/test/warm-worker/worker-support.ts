import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeAll } from 'vitest';
import { LeoflowTokenScope, type AwaitAssignmentRequest } from '@leoflow/protocol';
import {
  FakeAgentService,
  type AwaitEventInit,
  type Script,
} from '../support/fake-agent-service.js';
import { AGENT_MAIN, assertAgentBuilt, type RunningAgent } from '../support/spawn-agent.js';

export const PROJECTED = 'projected-sa-token.eyJhbGciOi.sig';
export const WORKER_TOKEN = 'worker-1.eyJzY3AiOiJ3b3JrZXIifQ.sig';

export interface StreamSeen {
  n: number;
  freeSlots: number;
}

/**
 * The control plane's assignment side, as a warm worker sees it: each AwaitAssignment stream
 * with a free slot gets the next queued assignment; `onStream` adds events first (renewals),
 * `afterAssignment` some after it. A stream stays open until the worker drops it (a worker keeps
 * its stream while it runs the attempt, and opens a new one when it is free again).
 */
export class AssignmentQueue {
  readonly pending: AwaitEventInit[] = [];
  readonly streams: StreamSeen[] = [];
  onStream: ((n: number) => AwaitEventInit[]) | undefined;
  /** events stream n sends a while after its assignment (a cancellation of the running attempt) */
  afterAssignment: ((n: number) => { delayMs: number; events: AwaitEventInit[] }) | undefined;

  assign(id: string, attemptToken: string): void {
    this.pending.push({
      event: {
        case: 'assignment',
        value: { assignmentId: id, attemptToken, heartbeatIntervalSeconds: 15 },
      },
    });
  }

  readonly stream = async function* (
    this: AssignmentQueue,
    n: number,
    req: AwaitAssignmentRequest,
    signal: AbortSignal,
  ): AsyncIterable<AwaitEventInit> {
    this.streams.push({ n, freeSlots: req.freeSlots });
    for (const e of this.onStream?.(n) ?? []) yield e;
    const next = req.freeSlots > 0 ? this.pending.shift() : undefined;
    if (next) {
      yield next;
      const later = this.afterAssignment?.(n);
      if (later) {
        await new Promise((r) => setTimeout(r, later.delayMs));
        if (!signal.aborted) for (const e of later.events) yield e;
      }
    }
    await new Promise<void>((resolve) => {
      if (signal.aborted) resolve();
      signal.addEventListener('abort', () => resolve(), { once: true });
    });
  };
}

export function useWorkerHarness() {
  const cleanups: Array<() => Promise<void> | void> = [];
  beforeAll(() => assertAgentBuilt());
  afterEach(async () => {
    while (cleanups.length) await cleanups.pop()!();
  });

  /** 0711: an attempt uid reaches its own 0700 work dir under it, and nothing else. */
  const tempDir = (): string => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'leoflow-warm-worker-'));
    chmodSync(dir, 0o711);
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    return dir;
  };

  const startFake = async (script: Script, queue?: AssignmentQueue) => {
    const fake = await FakeAgentService.start({
      exchangeToken: () => WORKER_TOKEN,
      exchangeScope: LeoflowTokenScope.WORKER,
      ...(queue ? { awaitAssignment: (n, req, signal) => queue.stream(n, req, signal) } : {}),
      ...script,
    });
    cleanups.push(() => fake.close());
    return fake;
  };

  /** The built agent as a warm pool pod runs it: LEOFLOW_WARM_WORKER=1, a projected token file. */
  const startWorker = (
    url: string,
    dir: string,
    env: Record<string, string> = {},
    tokenMode = 0o644,
  ) => {
    const tokenFile = path.join(dir, 'sa-token');
    writeFileSync(tokenFile, `${PROJECTED}\n`, { mode: tokenMode });
    const terminationLog = path.join(dir, 'termination-log');
    const child = spawn(process.execPath, [AGENT_MAIN], {
      env: {
        PATH: process.env['PATH'] ?? '/usr/bin:/bin',
        LANG: 'C.UTF-8',
        LEOFLOW_WARM_WORKER: '1',
        LEOFLOW_AGENT_URL: url,
        LEOFLOW_EXCHANGE_TOKEN_FILE: tokenFile,
        LEOFLOW_TERMINATION_LOG: terminationLog,
        LEOFLOW_WORKDIR: path.join(dir, 'work'),
        LEOFLOW_KILL_GRACE_MS: '500',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let diag = '';
    child.stdout.on('data', (b: Buffer) => (diag += b.toString()));
    child.stderr.on('data', (b: Buffer) => (diag += b.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
      child.once('exit', (code, signal) => r({ code, signal })),
    );
    cleanups.push(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    });
    const worker: RunningAgent & { terminationLog: string; tokenFile: string } = {
      child,
      pid: child.pid!,
      exited,
      diagnostics: () => diag,
      terminationLog,
      tokenFile,
    };
    return worker;
  };

  return { tempDir, startFake, startWorker, cleanups };
}
