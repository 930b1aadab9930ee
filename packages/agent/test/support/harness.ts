import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeAll } from 'vitest';
import { FakeAgentService, type Script } from './fake-agent-service.js';
import {
  assertAgentBuilt,
  spawnAgent,
  STANDBY_ENV,
  waitFor,
  type RunningAgent,
  type SpawnAgentOptions,
} from './spawn-agent.js';

export const TOKEN = 'tok-1.eyJhbGciOi.sig';

export interface AgentRun {
  fake: FakeAgentService;
  code: number | null;
  signal: NodeJS.Signals | null;
  diag: string;
  workdir: string;
  pid: number;
}

/**
 * Per-file helpers: every fake server, agent process and temp dir a test creates is torn down
 * after it, even when the test fails half way.
 */
export function useHarness() {
  const cleanups: Array<() => Promise<void> | void> = [];
  beforeAll(() => assertAgentBuilt());
  afterEach(async () => {
    while (cleanups.length) await cleanups.pop()!();
  });

  const tempDir = (prefix = 'leoflow-agent-test-'): string => {
    const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    return dir;
  };

  const startFake = async (script: Script): Promise<FakeAgentService> => {
    const fake = await FakeAgentService.start(script);
    cleanups.push(() => fake.close());
    return fake;
  };

  const start = (opts: SpawnAgentOptions): RunningAgent => {
    const agent = spawnAgent(opts);
    cleanups.push(() => {
      if (agent.child.exitCode === null && agent.child.signalCode === null)
        agent.child.kill('SIGKILL');
    });
    return agent;
  };

  /** Starts a fake with `script`, runs the agent against it to completion. */
  const runAgent = async (
    script: Script,
    opts: Partial<SpawnAgentOptions> = {},
  ): Promise<AgentRun> => {
    const fake = await startFake(script);
    const workdir = opts.workdir ?? tempDir();
    const agent = start({ url: fake.url, token: TOKEN, workdir, ...opts });
    const { code, signal } = await agent.exited;
    return { fake, code, signal, diag: agent.diagnostics(), workdir, pid: agent.pid };
  };

  /** A standby agent (no attempt, no credential) for `fake`, once it has opened its connection. */
  const standbyAgent = async (fake: FakeAgentService): Promise<RunningAgent> => {
    const agent = start({
      url: fake.url,
      token: '',
      workdir: '',
      holdTokenPipe: true,
      env: STANDBY_ENV,
    });
    await waitFor(
      () => fake.sessionsOpened > 0,
      10_000,
      'the standby agent to open its connection',
    );
    return agent;
  };

  return { tempDir, startFake, start, runAgent, standbyAgent };
}
