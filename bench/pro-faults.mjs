// pro_faults: the Pro fault-injection cases of test/e2e/pro-faults, repeated (CI runs each once).
//
// Each repetition runs the case files with vitest; every case writes one JSON line of figures
// (test/e2e/pro-faults/fault-case.ts, recordFigures) to a file this measurement names. Per fault
// it reports: runs in flight at the fault, runs completed, tries consumed by the fault (goal 0),
// duplicate or overlapping attempts (goal 0), p50 of fault → first task progressing again,
// beside the same cases' healthy baseline (trigger → the run's first task started, p50), and
// whether readiness told the truth in every repetition. A case that failed its assertions is
// counted as a failed repetition with its figures kept.
//
// LEOFLOW_BENCH_FAULT_CASES picks files (comma-separated names under test/e2e/pro-faults,
// without .test.ts); LEOFLOW_BENCH_FAULT_REPS the repetitions (default 5, --quick 1).
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO, log, onCleanup, percentile, tempDir } from './lib.mjs';

export const description =
  'Pro fault cases (leader kill -9, SIGTERM drain, SIGSTOP past the lease, PostgreSQL restart and 30 s stop, partitions, Lite disk full, clock jump) repeated: runs in flight/completed, tries consumed, overlapping attempts, p50 fault → first progress beside trigger → first start, readiness truthful';

// five repetitions of every case, one case at a time
export const timeoutMs = { quick: 20 * 60_000, full: 90 * 60_000 };

const DEFAULT_CASES = [
  'leader-crash',
  'leader-pause',
  'postgres-restart',
  'db-partition',
  'agent-partition',
  'lite-disk-full',
  'clock-jump',
];

function runVitest(files, figuresFile) {
  return new Promise((resolve) => {
    const child = spawn('npx', ['vitest', 'run', ...files], {
      cwd: REPO,
      env: { ...process.env, LEOFLOW_FAULT_FIGURES: figuresFile },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let tail = '';
    const keep = (b) => {
      tail = (tail + b.toString()).slice(-4_000);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const stop = () => child.kill('SIGTERM');
    onCleanup(stop);
    child.on('exit', (code) => resolve({ code, tail }));
  });
}

export async function run({ quick }) {
  const reps = Number(process.env.LEOFLOW_BENCH_FAULT_REPS ?? (quick ? 1 : 5));
  const cases = (process.env.LEOFLOW_BENCH_FAULT_CASES ?? DEFAULT_CASES.join(','))
    .split(',')
    .map((s) => s.trim())
    .filter((s) => existsSync(join(REPO, `test/e2e/pro-faults/${s}.test.ts`)));
  const { dir } = tempDir('leoflow-bench-faults-');
  const figuresFile = join(dir, 'figures.jsonl');
  const failures = [];
  for (let rep = 1; rep <= reps; rep++) {
    for (const c of cases) {
      log(`pro_faults: ${c}, repetition ${rep}/${reps}`);
      const { code, tail } = await runVitest([`test/e2e/pro-faults/${c}.test.ts`], figuresFile);
      if (code !== 0) failures.push({ case: c, repetition: rep, tail: tail.slice(-1_500) });
    }
  }
  const lines = existsSync(figuresFile)
    ? readFileSync(figuresFile, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l))
    : [];
  const byFault = new Map();
  for (const f of lines) byFault.set(f.fault, [...(byFault.get(f.fault) ?? []), f]);
  const faults = {};
  for (const [fault, list] of byFault) {
    const rec = list.map((f) => f.recoveryMs).filter((x) => x !== null);
    const base = list.map((f) => f.baselineStartMs).filter((x) => x !== null);
    const p50 = rec.length ? percentile(rec, 50) : null;
    const b50 = base.length ? percentile(base, 50) : null;
    faults[fault] = {
      repetitions: list.length,
      runs_in_flight: list.reduce((a, f) => a + f.runsInFlight, 0),
      runs_completed: list.reduce((a, f) => a + f.runsCompleted, 0),
      tries_consumed: list.reduce((a, f) => a + f.triesConsumed, 0),
      overlapping_attempts: list.reduce((a, f) => a + f.duplicateOrOverlapping, 0),
      fault_to_first_progress_p50_ms: p50,
      baseline_trigger_to_first_start_p50_ms: b50,
      ratio_to_baseline: p50 !== null && b50 ? Math.round((p50 / b50) * 100) / 100 : null,
      readiness_truthful: list.every((f) => f.readinessTruthful),
      readiness_notes: [
        ...new Set(list.filter((f) => !f.readinessTruthful).map((f) => f.readinessNote)),
      ],
      problems: list.flatMap((f) => f.problems).slice(0, 20),
    };
  }
  const clean = Object.values(faults).every(
    (f) =>
      f.tries_consumed === 0 &&
      f.overlapping_attempts === 0 &&
      f.readiness_truthful &&
      f.problems.length === 0,
  );
  return {
    repetitions: reps,
    cases,
    faults,
    failed_repetitions: failures,
    meets_target: clean && failures.length === 0,
  };
}
