import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { pino } from 'pino';
import { expect } from 'vitest';
import { SubprocessExecutor } from '../../src/executor/subprocess-executor.js';
import type { TaskInstanceRow } from '../../src/store/types.js';
import { executorContract, type ContractSubject, type Exposure } from './contract.js';

/** pid → parent pid, for every process on this host. */
function parents(): Map<number, number> {
  const out = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      out.set(Number(name), ppid);
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** The agent and every process below it (the task and what it started). */
function processTree(root: number): number[] {
  const ppid = parents();
  const tree = [root];
  for (let grew = true; grew;) {
    grew = false;
    for (const [pid, parent] of ppid) {
      if (tree.includes(parent) && !tree.includes(pid)) {
        tree.push(pid);
        grew = true;
      }
    }
  }
  return tree.filter((pid) => ppid.has(pid));
}

function readOr(file: string): string {
  try {
    return readFileSync(file, 'latin1');
  } catch {
    return '';
  }
}

function filesBelow(dir: string, out: string[] = []): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return out;
  }
  for (const name of names) {
    const path = join(dir, name);
    try {
      const st = statSync(path);
      if (st.isDirectory()) filesBelow(path, out);
      else if (st.isFile() && st.size <= 8 * 1024 * 1024) out.push(readOr(path));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const subprocess: ContractSubject = {
  kind: 'subprocess',
  fresh: (cp, cfg) =>
    new SubprocessExecutor({
      agentEntry: cfg.subprocess.agentEntry,
      workDir: cp.workRoot,
      diagnosticsDir: join(cfg.dataDir, 'agents'),
      isolation: cp.isolation,
      keepWorkDirs: false,
      agentCaFile: null,
      taskNodeModules: null,
      standbyAgents: 0,
      logger: pino({ level: 'silent' }),
    }),
  exposure: async (cp, ti: TaskInstanceRow) => {
    // The agent registers before it starts the task: wait for the task's process, so its
    // environment is really read.
    for (let i = 0; i < 100 && processTree(ti.pid!).length < 2; i++)
      await new Promise((r) => setTimeout(r, 50));
    const seen: Exposure[] = [];
    for (const pid of processTree(ti.pid!)) {
      seen.push(
        { site: `/proc/${pid}/environ`, text: readOr(`/proc/${pid}/environ`) },
        { site: `/proc/${pid}/cmdline`, text: readOr(`/proc/${pid}/cmdline`) },
      );
    }
    // The work root (every attempt's work dir and the SDK copy) and the agents' own output.
    for (const text of filesBelow(cp.workRoot)) seen.push({ site: 'work root', text });
    for (const text of filesBelow(join(dirname(cp.adminTokenFile), 'agents')))
      seen.push({ site: 'agent diagnostics', text });
    expect(processTree(ti.pid!).length, 'the task process is running').toBeGreaterThan(1);
    return seen.filter((e) => e.text !== '');
  },
  killAgent: (_cp, ti) => {
    process.kill(ti.pid!, 'SIGKILL');
    return Promise.resolve();
  },
  watchAttempt: (_cp, ti) => {
    // The task is a child of the agent; waits until the agent has started it.
    const tree = processTree(ti.pid!);
    return Promise.resolve({ gone: () => Promise.resolve(tree.every((pid) => !alive(pid))) });
  },
};

executorContract(subprocess);
// Without standby agents every attempt's agent is spawned cold (its own env and argv).
executorContract({
  ...subprocess,
  label: 'no standby agents',
  configure: (cfg) => {
    cfg.subprocess.standbyAgents = 0;
  },
});
