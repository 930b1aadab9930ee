import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { ManualClock } from '@leoflow/core';
import { AssignmentBroker } from '../../src/executor/assignments/assignment-broker.js';
import {
  HOST_AGENT_LOG,
  HOST_AGENT_PID_FILE,
  HOST_AGENT_SOCKET,
  HostAgentExecutor,
} from '../../src/executor/host-agent-executor.js';
import { executorContract, type ContractSubject, type Exposure } from './contract.js';
import { alive, filesBelow, processTree, readOr } from './host-exposure.js';

/**
 * Lite's host agent (execution.host_agent on) against the executor contract, end to end: the
 * control plane starts the real host agent (the agent bundle's runner mode on the data dir's
 * socket), and it runs every attempt with the agent code, each under its own token and uid.
 */
let dataDir = '';
let workRoot = '';

const agentPid = (): number | null => {
  try {
    return Number(readFileSync(join(dataDir, HOST_AGENT_PID_FILE), 'utf8').trim()) || null;
  } catch {
    return null;
  }
};
/** The host agent and everything below it (its attempts' sandboxes and tasks). */
const tree = () => {
  const pid = agentPid();
  return pid ? processTree(pid) : [];
};

const hostAgent: ContractSubject = {
  kind: 'subprocess',
  label: 'host agent',
  configure: (cfg) => {
    cfg.subprocess.hostAgent = true;
    cfg.subprocess.standbyAgents = 0;
    dataDir = cfg.dataDir;
  },
  started: (cp) => {
    workRoot = cp.workRoot;
    return Promise.resolve();
  },
  get podAgentUrl() {
    // What the host agent knows of where it reports: the control plane's socket (its argv).
    return join(dataDir, HOST_AGENT_SOCKET);
  },
  fresh: (cp, cfg) =>
    new HostAgentExecutor({
      agentEntry: cfg.subprocess.agentEntry,
      workDir: cp.workRoot,
      dataDir: cfg.dataDir,
      isolation: cp.isolation,
      taskNodeModules: null,
      slots: 4,
      broker: new AssignmentBroker(new ManualClock(Date.now())),
      store: cp.store,
      tenantId: 'default',
      logger: pino({ level: 'silent' }),
    }),
  exposure: async () => {
    for (let i = 0; i < 100 && tree().length < 2; i++) await new Promise((r) => setTimeout(r, 50));
    const seen: Exposure[] = [];
    for (const pid of tree()) {
      seen.push(
        { site: `/proc/${pid}/environ`, text: readOr(`/proc/${pid}/environ`) },
        { site: `/proc/${pid}/cmdline`, text: readOr(`/proc/${pid}/cmdline`) },
      );
    }
    for (const text of filesBelow(workRoot)) seen.push({ site: 'work root', text });
    seen.push({ site: 'host agent log', text: readOr(join(dataDir, 'agents', HOST_AGENT_LOG)) });
    return seen.filter((e) => e.text !== '');
  },
  killAgent: () => {
    const pid = agentPid();
    if (pid) process.kill(pid, 'SIGKILL');
    return Promise.resolve();
  },
  watchAttempt: async () => {
    for (let i = 0; i < 100 && tree().length < 2; i++) await new Promise((r) => setTimeout(r, 50));
    // The host agent stays; the attempt is everything below it now.
    const attempt = tree().slice(1);
    return { gone: () => Promise.resolve(attempt.every((pid) => !alive(pid))) };
  },
  notApplicable: {
    'fresh-executor':
      'the assignment queue is in the control plane’s memory, as for runners: a restarted control plane adopts the live host agent (its pid file), answers gone for claims it never handed over, and judges registered attempts by their heartbeats (test/security/host-agent.test.ts restarts a real standalone)',
  },
};

executorContract(hostAgent);
