/**
 * Process entry: `node packages/agent/dist/main.js` (or, with runner flags, the runner daemon). The executor passes the per-attempt bearer
 * on fd 3 (subprocess) or as LEOFLOW_AGENT_TOKEN (the Kubernetes executor's envvar transport),
 * and everything else in a minimal env (see docs/agent.md for the full contract).
 */
import type { RegisterResponse } from '@leoflow/protocol';
import { Agent, EXIT } from './agent.js';
import { ConfigError, readConfig, type AgentConfig } from './config.js';
import { stderrDiagnostics, type Diagnostics } from './diag.js';
import { AttemptIsolation } from './isolation.js';
import { procfs } from './attempt-uid.js';
import { closeInheritedFds } from './sandbox/fds.js';
import { TaskLauncher } from './sandbox/launcher.js';
import { createAgentConnection } from './rpc.js';
import { isRunnerInvocation, runnerMain } from './runner/runner-main.js';
import { isWarmWorker, warmWorkerMain } from './warm-worker/worker-main.js';
import type { WarmWorker } from './warm-worker/warm-worker.js';
import { parseAssignment, parseHandOffRegistration, type Assignment } from './assignment.js';
import {
  EXCHANGE_BOOTSTRAP_ENV,
  EXCHANGE_TOKEN_FILE_ENV,
  ExchangeBootstrapError,
  exchangeBootstrapCredential,
  writeTerminationLog,
} from './exchange.js';
import { takeEnvToken, TokenHolder, TokenReadError } from './token.js';
import { TokenPipe } from './token-pipe.js';

const TOKEN_FD = 3;
/** How long a standby agent waits for an assignment (the longest timer Node allows). */
const STANDBY_WAIT_MS = 2 ** 31 - 1;

/**
 * The agent's whole start, in the order it must happen: signal and crash handlers (a crash must
 * not leave the task group running with the attempt's secrets), the config, inherited
 * descriptors closed, the sandbox launcher, the attempt's uid, the token taken (fd 3, a standby's
 * pipe, the environment or the exchange), then the run. Long on purpose (issue 32 leaves it as
 * one of three): each step's precondition is the previous step's effect on the process, which
 * is easiest to audit read top to bottom in one place.
 */
async function main(): Promise<number> {
  const startedAt = Date.now();
  const diag = stderrDiagnostics();
  let agent: Agent | undefined;
  let isolation: AttemptIsolation | undefined;

  const onSignal = (signal: NodeJS.Signals): void => {
    if (!agent?.taskStarted) {
      diag.log('warn', `received ${signal} before the task started; exiting`);
      // Nothing ran as the attempt's uid (a standby may hold one already): give it back.
      void releaseUid(isolation, diag).finally(() => process.exit(EXIT.SIGNALLED));
      return;
    }
    agent.onSignal(signal);
  };
  for (const s of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(s, onSignal);

  // A crash must not leave the detached task group running with the attempt's secrets.
  const crash = (err: unknown): void => {
    diag.log(
      'error',
      `agent crashed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`,
    );
    agent?.killTaskGroupNow();
    process.exit(EXIT.FAILURE);
  };
  process.on('uncaughtException', crash);
  process.on('unhandledRejection', crash);

  let config;
  try {
    config = readConfig(process.env);
  } catch (err) {
    diag.log('error', err instanceof ConfigError ? err.message : String(err));
    return EXIT.BOOTSTRAP;
  }

  // Whatever started the control plane may have left descriptors open without close-on-exec:
  // none of them reaches the task (the sandbox helper closes all but 0-2 again before its exec).
  closeInheritedFds([TOKEN_FD]);
  // The host's sandbox, as the executor decided it (execution.isolation required: refused here
  // too, naming what is missing, before anything runs).
  let launcher: TaskLauncher;
  try {
    launcher = TaskLauncher.fromEnv(process.env);
  } catch (err) {
    diag.log('error', err instanceof Error ? err.message : String(err));
    return EXIT.BOOTSTRAP;
  }

  // Root with a uid range: this attempt gets a uid of its own (allocated in Agent.run, so a
  // failure to allocate is reported as the attempt's failure with its reason).
  isolation =
    config.attemptUids && process.getuid?.() === 0
      ? new AttemptIsolation(
          {
            ...config.attemptUids,
            pathVar: process.env['PATH'],
            instance: process.env['LEOFLOW_INSTALLATION_ID'],
          },
          procfs,
          launcher,
        )
      : undefined;

  // A standby agent boots, loads everything and opens its HTTP/2 session before it has an
  // attempt, so an assignment starts the task without paying for process start-up.
  const tokens = new TokenHolder(config.standby ? 'standby' : 'pending');
  const { client, warmUp } = createAgentConnection(config.agentUrl, tokens, {
    onSwitch: (from, to) =>
      diag.log('warn', `control plane at ${from} unreachable; next calls go to ${to}`),
  });
  // A standby agent is single-use, so the uid it will run its one attempt as can be allocated
  // while it waits: the allocation's /proc scan (milliseconds of synchronous work) then stays
  // off the path from the assignment to the task. Nothing runs as the uid before Register has
  // answered, as for any agent; a failed allocation is retried (and reported) by the attempt.
  const preAllocated =
    config.standby && isolation ? isolation.acquire().then(noop, noop) : Promise.resolve();
  if (config.standby) {
    // Opens the HTTP/2 session only: no request, so nothing reaches the server's handlers.
    await warmUp(2_000);
    await preAllocated;
    // When an assignment from here on meets a ready agent (bench/inter-task-latency reads it).
    diag.log('info', 'standby: ready; waiting for an assignment on fd 3');
  }

  let assignment: Assignment;
  /** Register's answer when the executor registered the attempt at hand-off */
  let registeredAtHandOff: RegisterResponse | undefined;
  // The Kubernetes executor's envvar transport: the token is an env value of the pod. It is
  // taken out of this process's environment at once, so nothing the agent starts inherits it
  // (the task's env is stripped of every LEOFLOW_* name besides); the value stays in the pod's
  // initial environment, which is that transport's documented exposure.
  const envToken = takeEnvToken(process.env);
  // The exchange transport: the pod holds only a projected service-account token (a file); the
  // agent's first call trades it for the attempt token.
  const exchangeFile = process.env[EXCHANGE_TOKEN_FILE_ENV];
  delete process.env[EXCHANGE_TOKEN_FILE_ENV];
  // The SecretKeyRef fallback: the bootstrap value itself is in the env; taken out at once.
  const exchangeSecret = process.env[EXCHANGE_BOOTSTRAP_ENV];
  delete process.env[EXCHANGE_BOOTSTRAP_ENV];
  try {
    if ((exchangeFile || exchangeSecret !== undefined) && !config.standby) {
      const exchanged = await exchangeBootstrapCredential({
        client,
        bootstrap: exchangeFile ? { tokenFile: exchangeFile } : { secretValue: exchangeSecret! },
        expectScope: 'attempt',
        timeoutMs: config.rpcTimeoutMs,
        retryUntil: Date.now() + config.bootstrapDeadlineMs,
        onRetry: (code, waitMs) =>
          diag.log('warn', `token exchange answered ${code}; asking again in ${waitMs} ms`),
      });
      assignment = { token: exchanged.token };
    } else if (envToken !== undefined && !config.standby) {
      assignment = { token: envToken };
    } else {
      const pipe = new TokenPipe(TOKEN_FD);
      try {
        const payload = await pipe.next(
          config.standby ? STANDBY_WAIT_MS : config.bootstrapDeadlineMs,
        );
        if (payload === undefined) {
          throw new TokenReadError(`token pipe (fd ${TOKEN_FD}) was empty`, 'empty');
        }
        assignment = parseAssignment(payload);
        if (assignment.handOff) {
          registeredAtHandOff = await handOffRegistration(pipe, assignment, config, diag);
        }
      } finally {
        await pipe.close();
      }
    }
  } catch (err) {
    await preAllocated;
    await releaseUid(isolation, diag);
    // A standby whose pipe closes empty was released by its executor (shutdown, pool shrink).
    if (config.standby && err instanceof TokenReadError && err.reason === 'empty') {
      return EXIT.OK;
    }
    const reason = `bootstrap failed: ${err instanceof Error ? err.message : String(err)}`;
    diag.log('error', reason);
    if (err instanceof ExchangeBootstrapError) writeTerminationLog(process.env, reason);
    return EXIT.BOOTSTRAP;
  }
  tokens.swap(assignment.token);
  assignment.token = '';
  // Registered at hand-off: the key that registration bound (or will find bound, when this
  // agent registers itself) is this agent's session key.
  if (assignment.handOff) tokens.adoptSessionKey(assignment.handOff.sessionKey);
  if (config.standby) {
    if (!assignment.taskInstanceId || !assignment.workdir) {
      diag.log(
        'error',
        'bootstrap failed: a standby assignment must name the task instance and workdir',
      );
      await preAllocated;
      await releaseUid(isolation, diag);
      return EXIT.BOOTSTRAP;
    }
    config = { ...config, taskInstanceId: assignment.taskInstanceId, workdir: assignment.workdir };
    process.chdir(config.workdir);
  }

  // Settled before the attempt asks for its uid, so one agent never holds two.
  await preAllocated;
  agent = new Agent({
    config,
    isolation,
    launcher,
    client,
    tokens,
    diag,
    agentEnv: process.env,
    // For a standby agent the bootstrap deadline runs from its assignment, not its start.
    startedAt: config.standby ? Date.now() : startedAt,
    ...(assignment.spec ? { assignedSpec: assignment.spec } : {}),
    ...(registeredAtHandOff ? { registeredAtHandOff } : {}),
  });
  const code = await agent.run();
  await releaseUid(isolation, diag);
  return code;
}

function noop(): void {}

/**
 * The hand-off's second message: what the executor's registration of this attempt answered.
 * Undefined — the agent then calls Register itself, with the session key the assignment carries —
 * when the executor could not register, or when the pipe ended before the message came (the
 * control plane died between its registration and the write: the attempt may already be
 * running under that key, and Register is idempotent for it).
 */
async function handOffRegistration(
  pipe: TokenPipe,
  assignment: Assignment,
  config: AgentConfig,
  diag: Diagnostics,
): Promise<RegisterResponse | undefined> {
  const message = await pipe.next(config.bootstrapDeadlineMs);
  if (message === undefined) {
    diag.log(
      'warn',
      'the token pipe ended before the executor sent its registration; registering with Register',
    );
    return undefined;
  }
  return parseHandOffRegistration(message, assignment.taskInstanceId);
}

/** A warm pool's pod: the worker serves attempts until the pool recycles it. */
function workerMain(): Promise<number> {
  const diag = stderrDiagnostics();
  let worker: WarmWorker | undefined;
  for (const s of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(s, () => worker?.stop());
  const crash = (err: unknown): void => {
    diag.log(
      'error',
      `warm worker crashed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`,
    );
    worker?.killNow();
    process.exit(EXIT.FAILURE);
  };
  process.on('uncaughtException', crash);
  process.on('unhandledRejection', crash);
  return warmWorkerMain({ env: process.env, diag, onWorker: (w) => (worker = w) });
}

/** Gives the attempt's uid back; one whose processes survived SIGKILL stays held (and is logged). */
async function releaseUid(isolation: AttemptIsolation | undefined, diag: Diagnostics) {
  if (isolation && !(await isolation.end())) {
    diag.log(
      'error',
      `processes of uid ${isolation.uid ?? '?'} survived SIGKILL; the uid stays held`,
    );
  }
}

// The same bundle is the runner daemon (`leoflow-runner --url-stdin`, the file the door's
// `bundle` path serves) and a warm pool's worker (LEOFLOW_WARM_WORKER=1); an agent started by
// an executor has no arguments.
const argv = process.argv.slice(2);
(isRunnerInvocation(argv)
  ? runnerMain(argv)
  : isWarmWorker(process.env)
    ? workerMain()
    : main()
).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(
      `leoflow-agent: fatal: ${err instanceof Error ? err.message : String(err)}\n`,
    );
    process.exit(EXIT.FAILURE);
  },
);
