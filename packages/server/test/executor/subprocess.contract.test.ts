import { dirname, join } from 'node:path';
import { pino } from 'pino';
import { expect } from 'vitest';
import { SubprocessExecutor } from '../../src/executor/subprocess-executor.js';
import type { TaskInstanceRow } from '../../src/store/types.js';
import { executorContract, type ContractSubject, type Exposure } from './contract.js';
import { alive, filesBelow, processTree, readOr, taskStarted } from './host-exposure.js';

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
    for (let i = 0; i < 100 && !taskStarted(ti.pid!); i++)
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
