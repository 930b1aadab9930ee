import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { AssignmentBroker } from '../../src/executor/assignments/assignment-broker.js';
import { RunnerExecutor } from '../../src/executor/runner-executor.js';
import type { TaskInstanceRow } from '../../src/store/types.js';
import { executorContract, type ContractSubject, type Exposure } from './contract.js';
import { alive, filesBelow, processTree, readOr } from './host-exposure.js';
import { ManualClock } from '@leoflow/core';

/**
 * The runner executor against the contract, end to end: Lite with its own door, one inbound
 * runner registered through the REST API, and the real `leoflow-runner` daemon (the agent bundle
 * with --url-stdin, the URL piped in) running every attempt with the agent code.
 */
let daemon: ChildProcess | undefined;
let workDir = '';
let logFile = '';
let doorRedacted = '';

/** The daemon's process and everything below it (its attempts' tasks). */
const tree = () => (daemon?.pid ? processTree(daemon.pid) : []);

const runner: ContractSubject = {
  kind: 'runner',
  configure: (cfg) => {
    cfg.defaultExecutor = 'runner';
    cfg.door.port = 0;
    cfg.subprocess.standbyAgents = 0;
  },
  async started(cp, cfg) {
    const base = dirname(cp.adminTokenFile);
    workDir = join(base, 'runner-work');
    logFile = join(base, 'runner.log');
    mkdirSync(workDir, { recursive: true });
    const admin = readFileSync(cp.adminTokenFile, 'utf8').trim();
    const res = await fetch(`${cp.httpUrl}/api/v1/runners`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'contract', kind: 'inbound', capacity: 4 }),
    });
    const body = (await res.json()) as { door_url: string; token: string };
    if (res.status !== 201 && res.status !== 200) throw new Error(JSON.stringify(body));
    const url = `${cp.doorUrl}/runners/${body.token}/`;
    doorRedacted = `${cp.doorUrl}/runners/<redacted>/`;
    const out = createWriteStream(logFile);
    daemon = spawn(
      process.execPath,
      [cfg.subprocess.agentEntry, '--url-stdin', '--work-dir', workDir],
      { env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, stdio: ['pipe', 'ignore', 'pipe'] },
    );
    daemon.stderr!.pipe(out);
    daemon.stdin!.end(`${url}\n`);
    return async () => {
      const d = daemon;
      if (!d || d.exitCode !== null) return;
      await new Promise<void>((resolve) => {
        d.once('exit', () => resolve());
        d.kill('SIGTERM');
        setTimeout(() => d.kill('SIGKILL'), 10_000).unref();
      });
    };
  },
  get podAgentUrl() {
    // What the daemon knows of where it reports: the door, its token redacted in its own log.
    return doorRedacted;
  },
  fresh: (cp) =>
    new RunnerExecutor({
      broker: new AssignmentBroker(new ManualClock(Date.now())),
      store: cp.store,
      reconcileIntervalMs: 0,
    }),
  exposure: async (_cp, _ti: TaskInstanceRow) => {
    for (let i = 0; i < 100 && tree().length < 2; i++) await new Promise((r) => setTimeout(r, 50));
    const seen: Exposure[] = [];
    for (const pid of tree()) {
      seen.push(
        { site: `/proc/${pid}/environ`, text: readOr(`/proc/${pid}/environ`) },
        { site: `/proc/${pid}/cmdline`, text: readOr(`/proc/${pid}/cmdline`) },
      );
    }
    for (const text of filesBelow(workDir)) seen.push({ site: 'runner work dir', text });
    seen.push({ site: 'runner log', text: readOr(logFile) });
    return seen.filter((e) => e.text !== '');
  },
  killAgent: () => Promise.resolve(),
  watchAttempt: async () => {
    for (let i = 0; i < 100 && tree().length < 2; i++) await new Promise((r) => setTimeout(r, 50));
    // The daemon stays; the attempt is everything below it now.
    const attempt = tree().slice(1);
    return { gone: () => Promise.resolve(attempt.every((pid) => !alive(pid))) };
  },
  notApplicable: {
    'lost-agent':
      'one daemon runs every attempt of a runner, so killing it is losing the runner: its attempts are reaped by the agent-lost threshold and retried (cells/cell-session.test.ts), not reported as an agent exit',
    'fresh-executor':
      'the assignment queue is in the control plane’s memory; a restarted runner executor answers gone for claims it never saw (runner-executor.test.ts), and registered attempts are judged by their heartbeats',
  },
};

executorContract(runner);
