import { execFileSync } from 'node:child_process';
import { chmodSync, closeSync, mkdirSync, openSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  checkHistory,
  historyTask,
  readExecutions,
  sqliteHistory,
} from '../../support/history-checker.js';
import {
  scratchDir,
  startStandalone,
  waitFor,
  writeDag,
  type Standalone,
} from '../../support/processes.js';

// Lite's data dir on a filesystem that fills up: a 48 MiB tmpfs mounted for this test (root
// only; skipped elsewhere, and said so). Runs in flight, then a filler file takes every free
// byte. Writes through the API are refused with LF_STORE_DISK_FULL (507) and leave nothing
// behind (a refused trigger has no run; SQLite's integrity check passes); when the filler is
// removed Lite carries on by itself: triggers succeed again and every acknowledged run
// completes. The history checker reads the SQLite file (WAL, read-only) at the end.

const canMount = process.getuid?.() === 0;
const DAG = 'slow_chain';
const TASKS = ['t1', 't2', 't3'];

let cleanup: (() => Promise<void>) | undefined;
afterEach(async () => {
  await cleanup?.();
  cleanup = undefined;
});

async function post(s: Standalone, runId: string): Promise<{ status: number; code?: string }> {
  const res = await fetch(`${s.url}/api/v1/dags/${DAG}/runs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${s.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ run_id: runId }),
    signal: AbortSignal.timeout(10_000),
  });
  const body = (await res.json().catch(() => ({}))) as { code?: string };
  return { status: res.status, ...(body.code ? { code: body.code } : {}) };
}

/** The trigger was acknowledged (200 or 201). */
const ok = (r: { status: number }) => r.status === 200 || r.status === 201;

/** Writes until the filesystem refuses: every free byte (and block) is taken. */
function fill(file: string): void {
  const fd = openSync(file, 'w');
  try {
    for (const size of [1 << 20, 64 << 10, 4 << 10, 512]) {
      const chunk = Buffer.alloc(size, 1);
      for (;;) {
        try {
          writeSync(fd, chunk);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOSPC') break;
          throw err;
        }
      }
    }
  } finally {
    closeSync(fd);
  }
}

describe.skipIf(!canMount)('Lite faults: the data dir fills up (tmpfs)', () => {
  it('writes are refused with LF_STORE_DISK_FULL and leave nothing half-written; Lite recovers when space returns', async () => {
    const scratch = scratchDir('leoflow-fault-diskfull-');
    const data = join(scratch.dir, 'data');
    const marks = join(scratch.dir, 'marks');
    mkdirSync(data);
    mkdirSync(marks, { mode: 0o777 });
    chmodSync(marks, 0o777);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=48m,mode=0755', 'tmpfs', data]);
    let s: Standalone | undefined;
    cleanup = async () => {
      await s?.kill9().catch(() => undefined);
      execFileSync('umount', ['-l', data]);
      scratch.cleanup();
    };
    const dags = join(scratch.dir, 'dags');
    writeDag(
      dags,
      DAG,
      `dag_id: ${DAG}\nmax_active_runs: 16\ntasks:\n${TASKS.map((t, i) => historyTask(marks, t, i === 0 ? [] : [TASKS[i - 1]!], 2)).join('')}`,
    );
    s = await startStandalone({ dataDir: data, dagsFolder: dags });
    const acknowledged: string[] = [];
    for (let i = 0; i < 3; i++) {
      expect(ok(await post(s, `before-${i}`))).toBe(true);
      acknowledged.push(`before-${i}`);
    }
    await waitFor(
      'the runs to have tasks running',
      async () => (new Set(readExecutions(marks).map((e) => e.run)).size >= 3 ? true : undefined),
      60_000,
    );

    const filler = join(data, 'filler');
    fill(filler);
    // Until one is refused: SQLite may still have room in pages it already owns.
    const refused: { status: number; code?: string }[] = [];
    const refusedIds: string[] = [];
    for (let i = 0; i < 200 && refused.length < 3; i++) {
      const r = await post(s, `full-${i}`);
      if (ok(r)) acknowledged.push(`full-${i}`);
      else {
        refused.push(r);
        refusedIds.push(`full-${i}`);
      }
    }
    expect(refused.length).toBeGreaterThan(0);
    expect(refused.every((r) => r.status === 507 && r.code === 'LF_STORE_DISK_FULL')).toBe(true);
    expect(s.proc.exitCode).toBeNull();

    rmSync(filler);
    // Lite carries on by itself: a trigger works again, every acknowledged run completes.
    await waitFor(
      'a trigger to be accepted again',
      async () => {
        const r = await post(s, 'after-0');
        return ok(r) ? true : undefined;
      },
      30_000,
    );
    acknowledged.push('after-0');
    const db = join(data, 'leoflow.db');
    const h = await sqliteHistory(db);
    try {
      await waitFor(
        'every acknowledged run to finish',
        async () => {
          const rows = await h.query(
            `select run_id, state from dag_runs where dag_id = $1 and state in ('success', 'failed')`,
            [DAG],
          );
          return rows.length >= acknowledged.length ? true : undefined;
        },
        180_000,
      );
      const report = await checkHistory(h.query, {
        dagId: DAG,
        tasks: TASKS,
        acknowledged,
        marks,
        lease: false,
      });
      // A refused trigger left no run: checkHistory reports any run nobody acknowledged.
      expect(report.problems).toEqual([]);
      for (const id of refusedIds) {
        expect(await h.query('select 1 from dag_runs where run_id = $1', [id])).toEqual([]);
      }
      expect(await h.query('pragma integrity_check')).toEqual([{ integrity_check: 'ok' }]);
      process.stdout.write(
        `fault figures ${JSON.stringify({ fault: 'Lite data dir full', runsInFlight: 3, runsCompleted: report.completed, triesConsumed: report.triesConsumed, duplicateOrOverlapping: report.duplicates.length + report.overlapping.length, refused: refused.length, acknowledgedWhileFull: acknowledged.filter((x) => x.startsWith('full-')).length, problems: report.problems })}\n`,
      );
    } finally {
      h.close();
    }
  }, 300_000);
});
