import { TaskLauncher } from '../sandbox/launcher.js';
import { statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  DEFAULT_ATTEMPT_NPROC_LIMIT,
  DEFAULT_ATTEMPT_UID_RANGE,
  parseNprocLimit,
  parseUidRange,
} from '@leoflow/core';
import { EXIT } from '../agent.js';
import { ConfigError, readConfig, type AgentConfig } from '../config.js';
import type { Diagnostics } from '../diag.js';
import {
  EXCHANGE_TOKEN_FILE_ENV,
  exchangeBootstrapCredential,
  writeTerminationLog,
} from '../exchange.js';
import { createAgentClient } from '../rpc.js';
import { TokenHolder } from '../token.js';
import { WarmWorker, type WarmWorkerOptions } from './warm-worker.js';

/** Set on a warm pool's pods: the agent is a worker reused across attempts. */
export const WARM_WORKER_ENV = 'LEOFLOW_WARM_WORKER';
/** What the worker passes on to tasks from its own environment (LEOFLOW_* never). */
const INHERITED_ENV = ['PATH', 'LANG', 'LC_ALL', 'TZ'];

export function isWarmWorker(env: Record<string, string | undefined>): boolean {
  return env[WARM_WORKER_ENV] === '1';
}

export interface WarmWorkerMainOptions {
  env: Record<string, string | undefined>;
  diag: Diagnostics;
  /** tests: the worker once built (to stop it), and seams the worker takes */
  onWorker?: (worker: WarmWorker) => void;
  overrides?: Partial<Pick<WarmWorkerOptions, 'isolationFor' | 'sweepDescendants' | 'timings'>>;
}

/**
 * A warm pod's entry: read the projected token, exchange it once for a worker-scoped token (an
 * attempt-scoped answer is refused: this pod was not started for one attempt), then serve
 * attempts until recycled. Everything that ends the worker is also written to the termination
 * log, where `kubectl describe pod` and the pool see it.
 */
export async function warmWorkerMain(o: WarmWorkerMainOptions): Promise<number> {
  const { env, diag } = o;
  const fail = (code: number, message: string): number => {
    diag.log('error', message);
    writeTerminationLog(env, message);
    return code;
  };
  let config: AgentConfig;
  let attemptUids: AgentConfig['attemptUids'];
  try {
    // The worker has no attempt of its own: the attempt fields are placeholders readConfig needs.
    config = readConfig({
      ...env,
      LEOFLOW_TASK_INSTANCE_ID: 'warm-worker',
      LEOFLOW_WORKDIR:
        env['LEOFLOW_WORKDIR'] || join(tmpdir(), `leoflow-worker-${process.getuid?.() ?? 'x'}`),
    });
    attemptUids = workerAttemptUids(env, config);
  } catch (err) {
    return fail(EXIT.BOOTSTRAP, err instanceof ConfigError ? err.message : String(err));
  }
  let launcher: TaskLauncher;
  try {
    // The projected token file is never in a task's view.
    launcher = TaskLauncher.fromEnv(env, {});
  } catch (err) {
    return fail(EXIT.BOOTSTRAP, err instanceof Error ? err.message : String(err));
  }
  const tokenFile = env[EXCHANGE_TOKEN_FILE_ENV];
  delete env[EXCHANGE_TOKEN_FILE_ENV];
  if (!tokenFile) {
    return fail(
      EXIT.BOOTSTRAP,
      `bootstrap failed: ${EXCHANGE_TOKEN_FILE_ENV} is not set: a warm worker exchanges the pod's projected service-account token (auth.agent_token_transport=exchange)`,
    );
  }
  warnIfAttemptsCanRead(tokenFile, attemptUids !== undefined, diag);
  let workerToken: TokenHolder;
  try {
    // ExchangeToken carries no bearer; the holder's placeholder is never sent.
    const exchanged = await exchangeBootstrapCredential({
      client: createAgentClient(config.agentUrl, new TokenHolder('pending')),
      bootstrap: { tokenFile },
      expectScope: 'worker',
      timeoutMs: config.rpcTimeoutMs,
      retryUntil: Date.now() + config.bootstrapDeadlineMs,
      onRetry: (code, waitMs) =>
        diag.log('warn', `token exchange answered ${code}; asking again in ${waitMs} ms`),
    });
    workerToken = new TokenHolder(exchanged.token);
  } catch (err) {
    return fail(
      EXIT.BOOTSTRAP,
      `bootstrap failed: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  if (process.getuid?.() !== 0) {
    diag.log(
      'warn',
      'warm worker: not root, so attempts share the worker uid: between attempts only the worker descendants are killed (see docs/agent.md, worker mode)',
    );
  }
  const agentEnv: Record<string, string> = {};
  for (const name of INHERITED_ENV) {
    const v = env[name];
    if (v !== undefined) agentEnv[name] = v;
  }
  const worker = new WarmWorker({
    agentUrl: config.agentUrl,
    workerToken,
    workRoot: config.workdir,
    agentEnv,
    attemptUids,
    launcher,
    diag,
    terminate: (message) => writeTerminationLog(env, message),
    timings: {
      reportDeadlineMs: config.reportDeadlineMs,
      bootstrapDeadlineMs: config.bootstrapDeadlineMs,
      killGraceMs: config.killGraceMs,
      rpcTimeoutMs: config.rpcTimeoutMs,
    },
    ...o.overrides,
  });
  o.onWorker?.(worker);
  return worker.run();
}

/** Root: each attempt gets its own uid, from LEOFLOW_ATTEMPT_UID_RANGE or the default range. */
function workerAttemptUids(
  env: Record<string, string | undefined>,
  config: AgentConfig,
): AgentConfig['attemptUids'] {
  if (process.getuid?.() !== 0) return undefined;
  if (config.attemptUids) return config.attemptUids;
  try {
    return {
      range: parseUidRange(DEFAULT_ATTEMPT_UID_RANGE, 'LEOFLOW_ATTEMPT_UID_RANGE'),
      nproc: parseNprocLimit(
        env['LEOFLOW_ATTEMPT_NPROC_LIMIT'] ?? String(DEFAULT_ATTEMPT_NPROC_LIMIT),
        'LEOFLOW_ATTEMPT_NPROC_LIMIT',
      ),
      lockDir: env['LEOFLOW_ATTEMPT_UID_LOCK_DIR'] || undefined,
    };
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
}

/**
 * The projected token stays mounted for the pod's life. An attempt cannot trade it again (the
 * exchange happens once per pod), but it is still the pod's service-account credential, so an
 * attempt uid must not be able to read it: the volume wants defaultMode 0400 (root).
 */
function warnIfAttemptsCanRead(file: string, attemptUids: boolean, diag: Diagnostics): void {
  if (!attemptUids) return;
  try {
    if ((statSync(file).mode & 0o044) !== 0) {
      diag.log(
        'warn',
        `warm worker: ${file} is readable by other uids, so attempts can read the projected token; mount it with defaultMode 0400`,
      );
    }
  } catch {
    // unreadable: the exchange reports it
  }
}
