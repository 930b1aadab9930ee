// log_throughput: stdout lines per second a chatty bash task gets stored (`seq 1 N`, every line
// read back and checked), beside the same `seq 1 N > /dev/null` run directly.
// With 50 delivered secrets (issue 34): the same task in a DAG declaring 50 secret Variables, so
// the agent's masker (built once per attempt, every output line through it) runs on every line;
// both variants in the same standalone, ABBA, and their ratio.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
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
  'stdout lines stored per second for a bash task running `seq 1 N` (task started_at → ended_at, all N lines read back in order), beside `seq 1 N > /dev/null`; ' +
  'and the same task with 50 delivered secret Variables (the masker on every line) beside none, same standalone, ABBA';

const SECRETS = 50;
const MASKING_TARGET = 0.8;

export async function run({ quick }) {
  const n = quick ? 50_000 : 300_000;

  log(`log_throughput: baseline: bash -c 'seq 1 ${n} > /dev/null' (5 runs)`);
  const baseMs = [];
  for (let i = 0; i < 5; i++)
    baseMs.push(await timedSpawn('bash', ['-c', `seq 1 ${n} > /dev/null`]));
  const baselineMs = Math.min(...baseMs);

  const dags = tempDir('leoflow-bench-dags-');
  // 50 secret Variables (sensitive names: stored sealed), seeded at start, declared by one DAG
  const seed = tempDir('leoflow-bench-vault-');
  const keys = Array.from(
    { length: SECRETS },
    (_, i) => `secret_token_${String(i).padStart(2, '0')}`,
  );
  writeFileSync(
    join(seed.dir, 'variables.json'),
    JSON.stringify(Object.fromEntries(keys.map((k) => [k, randomBytes(18).toString('base64url')]))),
  );
  writeDag(
    dags.dir,
    DAG_ID,
    `dag_id: ${DAG_ID}\nschedule: null\ntasks:\n  - task_id: seq\n    type: bash\n    command: seq 1 ${n}\n`,
  );
  writeDag(
    dags.dir,
    SECRETS_DAG_ID,
    `dag_id: ${SECRETS_DAG_ID}\nschedule: null\nvariables: [${keys.join(', ')}]\ntasks:\n  - task_id: seq\n    type: bash\n    command: seq 1 ${n}\n`,
  );
  const sa = await startStandalone({
    dagsFolder: dags.dir,
    label: 'log-throughput',
    extraArgs: ['--vault-seed', seed.dir],
  });
  try {
    // a discarded warm-up, so the first measured run is not the standalone's first attempt
    log(`log_throughput: warm-up run (${n} lines, discarded)`);
    await chatty(sa, DAG_ID, 'chatty_warmup', n);
    const runs = { plain: [], secrets: [] };
    let i = 0;
    for (const variant of ['plain', 'secrets', 'secrets', 'plain']) {
      const dagId = variant === 'plain' ? DAG_ID : SECRETS_DAG_ID;
      log(`log_throughput: one task printing ${n} lines (${variant})`);
      runs[variant].push(await chatty(sa, dagId, `chatty_${++i}`, n));
    }
    // the secrets variant really was delivered its 50 Variables (and so masked every line)
    const rec = await api(
      sa,
      'GET',
      `/api/v1/dags/${SECRETS_DAG_ID}/runs/chatty_2/tasks/seq/delivery`,
    );
    const delivered = rec.attempts?.[0]?.variables_delivered?.length ?? 0;
    if (delivered !== SECRETS)
      throw new Error(
        `the secrets variant was delivered ${delivered} Variables, expected ${SECRETS}`,
      );

    const first = runs.plain[0];
    const perS = (r) => (r.taskMs > 0 ? (r.stored / r.taskMs) * 1000 : null);
    const mean = (rs) => {
      const v = rs.map(perS).filter((x) => x !== null);
      return v.length ? round(v.reduce((a, b) => a + b, 0) / v.length, 0) : null;
    };
    const linesPerS = round(perS(first), 0);
    const baselinePerS = round((n / baselineMs) * 1000, 0);
    const plainPerS = mean(runs.plain);
    const secretsPerS = mean(runs.secrets);
    const maskingRatio = ratio(secretsPerS, plainPerS, 4);
    const allInOrder = [...runs.plain, ...runs.secrets].every((r) => r.stored === n && r.inOrder);
    return {
      description,
      lines: n,
      stored_lines: first.stored,
      all_stored_in_order: allInOrder,
      task_ms: first.taskMs,
      trigger_to_success_ms: first.wallMs,
      stored_lines_per_s: linesPerS,
      baseline: {
        spawn_env: Object.keys(BASELINE_ENV).join(', '),
        command: `seq 1 ${n} > /dev/null`,
        best_of_5_ms: round(baselineMs, 1),
        lines_per_s: baselinePerS,
      },
      ratio_to_baseline: ratio(linesPerS, baselinePerS, 4),
      masking: {
        delivered_secret_variables: SECRETS,
        order: 'a discarded warm-up, then plain, secrets, secrets, plain (one standalone)',
        task_ms: {
          plain: runs.plain.map((r) => r.taskMs),
          secrets: runs.secrets.map((r) => r.taskMs),
        },
        plain_lines_per_s: plainPerS,
        with_secrets_lines_per_s: secretsPerS,
        ratio: maskingRatio,
        target_ratio_min: MASKING_TARGET,
        meets_target: maskingRatio !== null && maskingRatio >= MASKING_TARGET,
      },
      target: { all_stored_in_order: true, masking_ratio_min: MASKING_TARGET },
      meets_target: allInOrder && maskingRatio !== null && maskingRatio >= MASKING_TARGET,
    };
  } finally {
    await sa.stop();
    await dags.remove();
    await seed.remove();
  }
}

const SECRETS_DAG_ID = 'bench_chatty_secrets';

/** One run of a chatty DAG: its task's time, and every line read back and checked. */
async function chatty(sa, dagId, runId, n) {
  const t0 = Date.now();
  await triggerRun(sa, dagId, runId);
  const d = await waitForRun(sa, dagId, runId, { timeoutMs: 300_000 });
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
      `/api/v1/dags/${dagId}/runs/${runId}/tasks/seq/logs?after_line=${after}&limit=10000`,
    );
    for (const l of page.lines) {
      if (l.stream !== 'stdout') continue;
      stored++;
      if (l.message !== String(stored)) inOrder = false;
    }
    if (page.lines.length < 10_000) break;
    after = page.next_after_line;
  }
  if (n !== stored) throw new Error(`${runId}: stored ${stored} of ${n} lines`);
  return { taskMs, wallMs, stored, inOrder };
}
