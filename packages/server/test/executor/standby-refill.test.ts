import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { SubprocessExecutor } from '../../src/executor/subprocess-executor.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/**
 * A handed-over standby agent's replacement starts only after a delay: spawning it at once puts
 * a synchronous spawn on the event loop and a node boot on the CPU while the handed-over agent
 * registers and fetches its secrets (bench/inter-task-latency.mjs showed the hop slow by that).
 * A cold start refills at once, as before: no attempt of its own is then on the critical path.
 */
describe('standby refill', () => {
  function setup(refillDelayMs: number, shrinkAfterMs?: number) {
    const dir = mkdtempSync(join(tmpdir(), 'leoflow-standby-refill-'));
    dirs.push(dir);
    // A stand-in agent entry: records that it started, then waits for its pipe to close.
    const started = join(dir, 'started.log');
    writeFileSync(started, '');
    const entry = join(dir, 'agent.mjs');
    writeFileSync(
      entry,
      `import { appendFileSync, createReadStream } from 'node:fs';
appendFileSync(${JSON.stringify(started)}, process.env.LEOFLOW_AGENT_STANDBY ? 'standby\\n' : 'cold\\n');
let got = 0;
createReadStream('', { fd: 3 }).on('data', (c) => (got += c.length)).on('end', () => {
  if (got === 0) appendFileSync(${JSON.stringify(started)}, 'released\\n');
  process.exit(0);
});
`,
    );
    const executor = new SubprocessExecutor({
      agentEntry: entry,
      workDir: join(dir, 'work'),
      diagnosticsDir: join(dir, 'agents'),
      isolation: { mode: 'none' },
      keepWorkDirs: false,
      agentCaFile: null,
      taskNodeModules: null,
      standbyAgents: 1,
      standbyRefillDelayMs: refillDelayMs,
      ...(shrinkAfterMs !== undefined ? { standbyShrinkAfterMs: shrinkAfterMs } : {}),
      logger: pino({ level: 'silent' }),
    });
    const lines = () => readFileSync(started, 'utf8').split('\n').filter(Boolean);
    const starts = () => lines().filter((l) => l !== 'released');
    const exits = () => lines().filter((l) => l === 'released').length;
    return { executor, starts, exits };
  }

  const target = { agentUrl: 'http://127.0.0.1:9', heartbeatIntervalMs: 15_000 };
  const launch = (ti: string) => ({
    identity: {
      tenant_id: 'default',
      dag_id: 'd',
      dag_run_id: 'dr-1',
      run_id: 'r1',
      task_id: 't',
      try_number: 1,
      task_instance_id: ti,
      dispatch_gen: 1,
    },
    credential: { mint: () => Promise.resolve('tok') },
    ...target,
  });

  async function until(pred: () => boolean, ms = 10_000): Promise<void> {
    const end = Date.now() + ms;
    while (!pred()) {
      if (Date.now() > end) throw new Error('timed out');
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  it('starts the replacement of a handed-over standby only after the delay', async () => {
    const { executor, starts } = setup(1_500);
    try {
      executor.warm(target);
      await until(() => starts().length === 1);
      const t0 = Date.now();
      await executor.start(launch('ti-a'));
      // An immediate refill's agent would write its marker within a node boot (~100-300 ms).
      await until(() => starts().length === 2);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(1_400);
      expect(starts()).toEqual(['standby', 'standby']);
    } finally {
      await executor.close();
    }
  });

  it('a cold start (no standby ready) refills at once, and the pool grows by one for it', async () => {
    const { executor, starts } = setup(60_000);
    try {
      // no warm(): nothing is on standby, so the attempt's agent is started cold; that miss
      // raises the pool from its floor (1) to 2
      const t0 = Date.now();
      await executor.start(launch('ti-b'));
      await until(() => starts().length === 3);
      expect(Date.now() - t0).toBeLessThan(30_000);
      expect([...starts()].sort()).toEqual(['cold', 'standby', 'standby']);
    } finally {
      await executor.close();
    }
  });

  it('a pool grown by misses holds at twice the floor and falls back to the floor once quiet', async () => {
    const { executor, starts, exits } = setup(60_000, 600);
    try {
      await executor.start(launch('ti-c')); // miss: 2
      await executor.start(launch('ti-d')); // takes one (the other is left)
      await executor.start(launch('ti-e')); // takes the last
      await executor.start(launch('ti-f')); // miss again: ceiling 2 (twice the floor of 1)
      await until(() => starts().filter((s) => s === 'standby').length >= 4);
      // settled: 2 cold, 2 + 2 standby started, 2 of them handed over; none has exited
      await new Promise((r) => setTimeout(r, 300));
      expect(starts().filter((s) => s === 'cold')).toHaveLength(2);
      expect(starts().filter((s) => s === 'standby')).toHaveLength(4);
      expect(exits()).toBe(0);
      // quiet for the shrink period: one idle standby is told to exit (empty pipe), one stays
      await until(() => exits() === 1, 10_000);
      await new Promise((r) => setTimeout(r, 1_500));
      expect(exits()).toBe(1);
    } finally {
      await executor.close();
    }
  });
});
