import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import {
  SubprocessExecutor,
  type SubprocessExecutorOptions,
} from '../../src/executor/subprocess-executor.js';
import type { AttemptLaunch } from '../../src/attempts/attempt-launch.js';

export const PIPE_DUMP_AGENT_URL = 'http://127.0.0.1:9';

/**
 * A subprocess executor whose agent entry is a stand-in that writes what fd 3 carried to a file
 * once the pipe closes: what the executor hands an agent, read from the agent's side.
 */
export function pipeDumpExecutor(
  dir: string,
  opts: { standbyAgents: number; logger?: Logger } & Partial<SubprocessExecutorOptions>,
): {
  executor: SubprocessExecutor;
  exited: Promise<void>;
  /** the first message (the assignment) */
  payload: () => Record<string, string>;
  /** every message, in order */
  messages: () => Record<string, string>[];
} {
  const entry = join(dir, 'pipe-dump.mjs');
  const dump = join(dir, 'fd3.json');
  writeFileSync(
    entry,
    `import { createReadStream, writeFileSync } from 'node:fs';
const chunks = [];
createReadStream('', { fd: 3 })
  .on('data', (c) => chunks.push(c))
  .on('end', () => writeFileSync(${JSON.stringify(dump)}, Buffer.concat(chunks)));
`,
  );
  const executor = new SubprocessExecutor({
    agentEntry: entry,
    workDir: join(dir, 'work'),
    diagnosticsDir: join(dir, 'agents'),
    isolation: { mode: 'none' },
    keepWorkDirs: true,
    agentCaFile: null,
    taskNodeModules: null,
    logger: pino({ level: 'silent' }),
    ...opts,
  });
  const exited = new Promise<void>((resolve) => executor.onAgentExit(() => resolve()));
  if (opts.standbyAgents > 0)
    executor.warm({ agentUrl: PIPE_DUMP_AGENT_URL, heartbeatIntervalMs: 15_000 });
  return {
    executor,
    exited,
    payload: () => messagesIn(dump)[0]!,
    messages: () => messagesIn(dump),
  };
}

/** One attempt's launch for the stand-in (its token is `tok.for.<task instance>`). */
export function pipeDumpLaunch(
  taskInstanceId: string,
  extra: Partial<AttemptLaunch> = {},
): AttemptLaunch {
  return {
    identity: {
      tenant_id: 'default',
      dag_id: 'handoff',
      dag_run_id: 'dr-1',
      run_id: 'r1',
      task_id: 'down',
      try_number: 1,
      task_instance_id: taskInstanceId,
      dispatch_gen: 1,
    },
    credential: { mint: () => Promise.resolve(`tok.for.${taskInstanceId}`) },
    agentUrl: PIPE_DUMP_AGENT_URL,
    heartbeatIntervalMs: 15_000,
    ...extra,
  };
}

function messagesIn(dump: string): Record<string, string>[] {
  return readFileSync(dump, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record<string, string>);
}
