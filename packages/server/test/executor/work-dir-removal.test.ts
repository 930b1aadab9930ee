import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { AgentExit } from '../../src/attempts/attempt-lifecycle.js';
import { SubprocessExecutor } from '../../src/executor/subprocess-executor.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function until(pred: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * A finished attempt's work dir is removed off the event loop (renamed, then deleted
 * asynchronously); the removal must still happen, and must never reach a new dispatch of the
 * same try, which makes the same directory again.
 */
describe('subprocess executor: work dir removal', () => {
  function setup() {
    const dir = mkdtempSync(join(tmpdir(), 'leoflow-workdir-removal-'));
    dirs.push(dir);
    const seen = join(dir, 'seen.log');
    writeFileSync(seen, '');
    // A stand-in agent: leaves a file in its work dir, reads its pipe to the end, then reports
    // whether its work dir still exists a moment later and exits.
    const entry = join(dir, 'agent.mjs');
    writeFileSync(
      entry,
      `import { appendFileSync, createReadStream, existsSync, writeFileSync } from 'node:fs';
const wd = process.env.LEOFLOW_WORKDIR;
writeFileSync(wd + '/left-behind', 'x');
createReadStream('', { fd: 3 }).on('data', () => {}).on('end', () => setTimeout(() => {
  appendFileSync(${JSON.stringify(seen)}, (existsSync(wd + '/left-behind') ? 'kept' : 'lost') + '\\n');
  process.exit(0);
}, 150));
`,
    );
    const work = join(dir, 'work');
    const executor = new SubprocessExecutor({
      agentEntry: entry,
      workDir: work,
      diagnosticsDir: join(dir, 'agents'),
      isolation: { mode: 'none' },
      keepWorkDirs: false,
      agentCaFile: null,
      taskNodeModules: null,
      standbyAgents: 0,
      logger: pino({ level: 'silent' }),
    });
    const exits: AgentExit[] = [];
    executor.onAgentExit((e) => exits.push(e));
    return {
      executor,
      work,
      exits,
      seen: () => readFileSync(seen, 'utf8').split('\n').filter(Boolean),
    };
  }

  const launch = (dispatch_gen: number) => ({
    identity: {
      tenant_id: 'default',
      dag_id: 'd',
      dag_run_id: 'dr-1',
      run_id: 'r1',
      task_id: 't',
      try_number: 1,
      task_instance_id: 'ti-w',
      dispatch_gen,
    },
    credential: { mint: () => Promise.resolve('tok') },
    agentUrl: 'http://127.0.0.1:9',
    heartbeatIntervalMs: 15_000,
  });

  it('removes the work dir once the agent has exited', async () => {
    const { executor, work, exits } = setup();
    try {
      await executor.start(launch(1));
      await until(() => exits.length === 1);
      await until(() => readdirSync(work).length === 0);
      expect(existsSync(join(work, 'ti-w-try1'))).toBe(false);
    } finally {
      await executor.close();
    }
  });

  it('a re-dispatch of the same try started right after the exit keeps its own work dir', async () => {
    const { executor, work, exits, seen } = setup();
    try {
      // Same try, same directory name, started in the very turn the first one's removal begins.
      let second: Promise<unknown> | undefined;
      executor.onAgentExit(() => {
        second ??= executor.start(launch(2));
      });
      await executor.start(launch(1));
      await until(() => exits.length === 2);
      await second;
      expect(seen()).toEqual(['kept', 'kept']);
      await until(() => readdirSync(work).length === 0);
    } finally {
      await executor.close();
    }
  });
});
