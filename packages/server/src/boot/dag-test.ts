import {
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readlinkSync,
  realpathSync,
  rmSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import {
  dagSpecHash,
  LeoflowError,
  type CompileDiagnostic,
  type DagSpec,
  type TaskInstanceState,
} from '@leoflow/core';
import { pino, type Logger } from 'pino';
import type { ServerConfig } from '../config/server-config.js';
import { defaultDagLoader, type DagFileLoader } from '../scheduler/dags/dag-loader.js';
import { declarationProblems } from '../scheduler/dags/registration.js';
import { INSTALL_ID_FILE } from '../executor/work-root.js';
import { openStore } from '../store/open-store.js';
import { startControlPlane } from './control-plane.js';

/** One task instance of the test run, as `leoflow dags test -o json` prints it. */
export interface DagTestTaskInstance {
  task_id: string;
  /** -1 for a task that is not mapped */
  map_index: number;
  /** Airflow's state names */
  state: TaskInstanceState;
  try_number: number;
  /** the task's return value (its XCom `return_value`), parsed when JSON; null when none */
  xcom_return: unknown;
}

export interface DagTestResult {
  dag_id: string;
  run_id: string;
  state: string;
  task_instances: DagTestTaskInstance[];
}

export interface DagTestLogLine {
  task_id: string;
  map_index: number;
  try_number: number;
  stream: string;
  message: string;
}

export interface DagTestOptions {
  spec: DagSpec;
  /** the DAG file it was compiled from (declaration refusals point into it) */
  file: string;
  loader?: DagFileLoader;
  conf?: Record<string, unknown>;
  /** the run's logical date (ms); default now */
  logicalDate?: number;
  /** import connections.json / variables.json from here into the throwaway vault */
  vaultSeedDir?: string;
  /** a stopped Lite's data dir: its vault, keys and grants, used from a throwaway copy */
  sourceDataDir?: string;
  /**
   * The control plane's settings as a Lite on this machine would resolve them (the sandbox, the
   * credential plane); the data dir, ports, DAGs folder and seed are replaced.
   */
  baseConfig: ServerConfig;
  onLog: (line: DagTestLogLine) => void;
  logger?: Logger;
  /** how often the run's state and new log lines are read */
  pollMs?: number;
  /** aborting stops the run's attempts and cleans up (Ctrl-C in `leoflow dags test`) */
  signal?: AbortSignal;
}

/** A refusal before the run: diagnostics with file:line:column, and nothing ran. */
export class DagTestRefused extends LeoflowError {
  constructor(
    code: string,
    message: string,
    readonly diagnostics: Omit<CompileDiagnostic, 'severity'>[],
  ) {
    super(code, message);
  }
}

/** Whether a process on this machine has `file` open (Linux /proc; false where unreadable). */
function openByAProcess(file: string): boolean {
  let target: string;
  try {
    target = realpathSync(file);
  } catch {
    return false;
  }
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((p) => /^\d+$/.test(p) && Number(p) !== process.pid);
  } catch {
    return false;
  }
  for (const pid of pids) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        if (readlinkSync(`/proc/${pid}/fd/${fd}`) === target) return true;
      } catch {
        // closed meanwhile
      }
    }
  }
  return false;
}

/**
 * Copies a stopped Lite's data directory into `into` and leaves the copy quiet: every DAG
 * paused (nothing of theirs is scheduled) and refused when it holds unfinished runs, which the
 * test's scheduler would otherwise resume. The original is never written.
 */
async function copyStoppedDataDir(source: string, into: string): Promise<void> {
  const dir = resolve(source);
  const db = join(dir, 'leoflow.db');
  if (!existsSync(db)) {
    throw new LeoflowError(
      'LF_DATA_DIR_IN_USE',
      `--data-dir ${dir} holds no leoflow.db; pass the data directory of a Leoflow Lite (the one \`leoflow standalone --data-dir\` used)`,
    );
  }
  if (openByAProcess(db)) {
    throw new LeoflowError(
      'LF_DATA_DIR_IN_USE',
      `--data-dir ${dir}: a running process has its database open (a Leoflow Lite?); stop it first — \`dags test\` reads a stopped one's vault from a copy`,
    );
  }
  // Not its install id: the copy gets its own, hence its own work root (removed afterwards).
  cpSync(dir, into, {
    recursive: true,
    filter: (src) => !src.endsWith('.sock') && basename(src) !== INSTALL_ID_FILE,
  });
  const store = await openStore({ kind: 'sqlite', file: join(into, 'leoflow.db') });
  try {
    await store.migrate();
    const unfinished = await store.listRunsInStates(['queued', 'running']);
    if (unfinished.length > 0) {
      throw new LeoflowError(
        'LF_DATA_DIR_IN_USE',
        `--data-dir ${dir} has ${unfinished.length} unfinished run(s) (e.g. ${unfinished[0]!.dag_id} ${unfinished[0]!.run_id}); a test would resume them — start that Lite and let them finish (or clear them), or use --vault-seed`,
      );
    }
    for (const d of await store.listSchedulableDags())
      await store.setDagPaused(d.tenant_id, d.dag_id, true, Date.now());
  } finally {
    await store.close();
  }
}

function parseXCom(value: Uint8Array, contentType: string): unknown {
  const text = Buffer.from(value).toString('utf8');
  if (contentType.includes('json')) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return text;
    }
  }
  return text;
}

/**
 * `leoflow dags test`: one run of a compiled DAG in this process, against a throwaway store in
 * a temporary data directory, with the real agents, the real sandbox and the real credential
 * plane (its own keys, the vault seeded from --vault-seed or copied from a stopped Lite). Each
 * task's log lines are handed to onLog as they arrive. Everything temporary is removed after.
 */
export async function runDagTest(opts: DagTestOptions): Promise<DagTestResult> {
  const tmp = mkdtempSync(join(tmpdir(), 'leoflow-dags-test-'));
  const dataDir = join(tmp, 'data');
  const logger = opts.logger ?? pino({ level: 'silent' });
  let workRoot: string | null = null;
  let close: (() => Promise<void>) | null = null;
  try {
    if (opts.sourceDataDir !== undefined) await copyStoppedDataDir(opts.sourceDataDir, dataDir);
    const base = opts.baseConfig;
    const { pro: _pro, ...lite } = base;
    const cfg: ServerConfig = {
      ...lite,
      dataDir,
      database: { kind: 'sqlite', file: join(dataDir, 'leoflow.db') },
      dagsFolder: null,
      dagsPausedAtCreation: true,
      vaultSeedDir: opts.vaultSeedDir ? resolve(opts.vaultSeedDir) : null,
      http: { host: '127.0.0.1', port: 0 },
      agent: { ...base.agent, host: '127.0.0.1', port: 0, advertiseUrls: null },
      metrics: { ...base.metrics, port: null, freePortIfDefaultTaken: false },
      door: { ...base.door, port: null, publicUrl: null, cellPort: null },
    };
    const cp = await startControlPlane(cfg, { logger });
    close = () => cp.close();
    workRoot = cp.workRoot;
    const tenant = cfg.tenantId;
    const spec = opts.spec;
    const loader = opts.loader ?? defaultDagLoader;
    await refuseUnavailableDeclarations(cp.store, tenant, opts, loader);
    await cp.store.putDagVersion(tenant, spec, dagSpecHash(spec), Date.now(), {
      pausedAtCreation: true,
    });
    const run = await cp.runs.trigger(tenant, spec.dag_id, {
      ...(opts.conf ? { conf: opts.conf } : {}),
      ...(opts.logicalDate !== undefined ? { logicalDate: opts.logicalDate } : {}),
    });
    const seen = new Map<string, number>(); // task/map/try → last line number printed
    const pump = async () => {
      for (const ti of await cp.store.listTaskInstances(run.id)) {
        if (ti.state === 'none' || ti.state === 'scheduled') continue;
        const map = ti.map_index ?? -1;
        for (let t = 1; t <= ti.try_number; t++) {
          const key = `${ti.task_id}\u0000${map}\u0000${t}`;
          let after = seen.get(key) ?? 0;
          for (;;) {
            const lines = await cp.store.readLogs(run.id, ti.task_id, t, after, 500, map);
            for (const l of lines) {
              opts.onLog({
                task_id: ti.task_id,
                map_index: map,
                try_number: t,
                stream: l.stream,
                message: l.message,
              });
              after = l.line_number;
            }
            if (lines.length < 500) break;
          }
          seen.set(key, after);
        }
      }
    };
    const pollMs = opts.pollMs ?? 150;
    let state = run.state;
    for (;;) {
      await pump();
      const now = await cp.store.getRunById(run.id);
      state = now?.state ?? state;
      if (state === 'success' || state === 'failed') break;
      if (opts.signal?.aborted) {
        throw new LeoflowError(
          'LF_DAG_TEST_FAILED',
          `interrupted: the test run of ${spec.dag_id} was stopped before it ended (its attempts were stopped, its temporary files removed)`,
        );
      }
      await new Promise((r) => setTimeout(r, pollMs));
    }
    // The agent ships its last lines before it reports; one more read takes what is left.
    await pump();
    const tis = await cp.store.listTaskInstances(run.id);
    const task_instances: DagTestTaskInstance[] = [];
    for (const ti of tis) {
      const map = ti.map_index ?? -1;
      const x = await cp.store.getXCom(run.id, ti.task_id, 'return_value', map);
      task_instances.push({
        task_id: ti.task_id,
        map_index: map,
        state: ti.state,
        try_number: ti.try_number,
        xcom_return: x ? parseXCom(x.value, x.content_type) : null,
      });
    }
    task_instances.sort((a, b) =>
      a.task_id === b.task_id ? a.map_index - b.map_index : a.task_id < b.task_id ? -1 : 1,
    );
    return { dag_id: spec.dag_id, run_id: run.run_id, state, task_instances };
  } finally {
    if (close) await close();
    rmSync(tmp, { recursive: true, force: true });
    if (workRoot) rmSync(workRoot, { recursive: true, force: true });
  }
}

/** A declared secret the test's vault does not have, or has not granted, refuses the test before
 * anything runs (each located in the DAG file). */
async function refuseUnavailableDeclarations(
  store: Parameters<typeof declarationProblems>[0],
  tenant: string,
  opts: DagTestOptions,
  loader: DagFileLoader,
): Promise<void> {
  const spec = opts.spec;
  const problems = await declarationProblems(store, tenant, spec);
  if (problems.length > 0) {
    const diagnostics = problems.map((p) => {
      const at = loader.locateDeclaration(opts.file, p.kind, p.name);
      const noun = p.kind === 'variables' ? 'variable' : 'connection';
      return {
        code: p.code,
        message:
          p.code === 'LF_DAG_UNKNOWN_DECLARATION'
            ? `dag "${spec.dag_id}" declares ${noun} "${p.name}", which the test's vault does not have`
            : `dag "${spec.dag_id}" declares ${noun} "${p.name}", which is not granted to it`,
        file: opts.file,
        line: at?.line ?? 1,
        column: at?.column ?? 1,
        path: at?.path ?? p.kind,
        hint:
          p.code === 'LF_DAG_UNKNOWN_DECLARATION'
            ? `give the test a vault that has it: --vault-seed <folder with ${p.kind}.json> or --data-dir <a stopped Lite's data dir>`
            : p.hint,
      };
    });
    throw new DagTestRefused(
      problems[0]!.code,
      `${problems.length} declaration(s) refused; nothing ran`,
      diagnostics,
    );
  }
}
