// log_throughput: stdout lines per second a chatty bash task gets stored (`seq 1 N`, every line
// read back and checked), beside the same `seq 1 N > /dev/null` run directly.
import {
  BASELINE_ENV,
  api,
  describeFailure,
  log,
  ms,
  ratio,
  round,
  startStandalone,
  tempDir,
  timedSpawn,
  triggerRun,
  waitForRun,
  writeDag,
} from './lib.mjs';

const DAG_ID = 'bench_chatty';

export const description =
  'stdout lines stored per second for a bash task running `seq 1 N` (task started_at → ended_at, all N lines read back in order), beside `seq 1 N > /dev/null`';

export async function run({ quick }) {
  const n = quick ? 50_000 : 300_000;

  log(`log_throughput: baseline: bash -c 'seq 1 ${n} > /dev/null' (5 runs)`);
  const baseMs = [];
  for (let i = 0; i < 5; i++)
    baseMs.push(await timedSpawn('bash', ['-c', `seq 1 ${n} > /dev/null`]));
  const baselineMs = Math.min(...baseMs);

  const dags = tempDir('leoflow-bench-dags-');
  writeDag(
    dags.dir,
    DAG_ID,
    `dag_id: ${DAG_ID}\nschedule: null\ntasks:\n  - task_id: seq\n    type: bash\n    command: seq 1 ${n}\n`,
  );
  const sa = await startStandalone({ dagsFolder: dags.dir, label: 'log-throughput' });
  try {
    log(`log_throughput: one task printing ${n} lines`);
    const t0 = Date.now();
    await triggerRun(sa, DAG_ID, 'chatty_1');
    const d = await waitForRun(sa, DAG_ID, 'chatty_1', { timeoutMs: 300_000 });
    const wallMs = Date.now() - t0;
    if (d.run.state !== 'success') throw new Error(describeFailure(d, sa));
    const ti = d.task_instances[0];
    const taskMs = ms(ti.ended_at) - ms(ti.started_at);

    let stored = 0;
    let inOrder = true;
    let after = 0;
    for (;;) {
      const page = await api(
        sa,
        'GET',
        `/api/v1/dags/${DAG_ID}/runs/chatty_1/tasks/seq/logs?after_line=${after}&limit=10000`,
      );
      for (const l of page.lines) {
        if (l.stream !== 'stdout') continue;
        stored++;
        if (l.message !== String(stored)) inOrder = false;
      }
      if (page.lines.length < 10_000) break;
      after = page.next_after_line;
    }
    const linesPerS = taskMs > 0 ? round((stored / taskMs) * 1000, 0) : null;
    const baselinePerS = round((n / baselineMs) * 1000, 0);
    return {
      description,
      lines: n,
      stored_lines: stored,
      all_stored_in_order: stored === n && inOrder,
      task_ms: taskMs,
      trigger_to_success_ms: wallMs,
      stored_lines_per_s: linesPerS,
      baseline: {
        spawn_env: Object.keys(BASELINE_ENV).join(', '),
        command: `seq 1 ${n} > /dev/null`,
        best_of_5_ms: round(baselineMs, 1),
        lines_per_s: baselinePerS,
      },
      ratio_to_baseline: ratio(linesPerS, baselinePerS, 4),
      target: { all_stored_in_order: true },
      meets_target: stored === n && inOrder,
    };
  } finally {
    await sa.stop();
    await dags.remove();
  }
}
