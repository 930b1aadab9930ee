import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dagSpecHash, isActive, type DagSpec } from '@leoflow/core';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultServerConfig, type ServerConfig } from '../../src/config/server-config.js';
import { startControlPlane, type ControlPlane } from '../../src/boot/control-plane.js';
import { EXECUTOR_KINDS } from '../../src/executor/catalog.js';
import type { Executor, PendingClaim } from '../../src/executor/executor.js';
import type { AttemptLaunch } from '../../src/attempts/attempt-launch.js';
import type { DagRunRow, TaskInstanceRow } from '../../src/store/types.js';
import { spec, task } from '../support/spec-builders.js';

/** What the contract needs to know about one executor kind beyond the port itself. */
export interface ContractSubject {
  /** the executor kind's name (EXECUTOR_KINDS) */
  kind: string;
  /** names a variant of the same kind (another configuration) */
  label?: string;
  /** adjusts the control plane's configuration for this executor (default executor, its section) */
  configure?(cfg: ServerConfig): void;
  /** the executor under test; undefined = the one the control plane builds from cfg */
  create?(cfg: ServerConfig): Executor;
  /** a new executor of the same kind holding no handles, as a restarted control plane builds */
  fresh(cp: ControlPlane, cfg: ServerConfig): Executor;
  /**
   * Everything a reader of the host (or the cluster) could see of a running attempt: the
   * environment and argv of its processes, files it was given, objects created for it, each
   * named by where it was found. Must be non-empty for a running attempt.
   */
  exposure(cp: ControlPlane, ti: TaskInstanceRow): Promise<Exposure[]>;
  /**
   * Where this executor's token transport puts the credential by design (its posture and
   * doctor name the exposure): each of these sites must hold the attempt's credential, and no
   * other site may. Empty or absent: the credential is in none (the subprocess pipe).
   */
  credentialSites?: readonly string[];
  /** the agent URL the attempt's agent is given, when it is not the control plane's own */
  podAgentUrl?: string;
  /** kills the attempt's agent without letting it report (kill -9, a lost node) */
  killAgent(cp: ControlPlane, ti: TaskInstanceRow): Promise<void>;
  /** notes what of the running attempt exists now (agent, task), to ask later if all is gone */
  watchAttempt(cp: ControlPlane, ti: TaskInstanceRow): Promise<{ gone(): Promise<boolean> }>;
  /** once the control plane is up (a runner to connect); what it returns runs before it closes */
  started?(cp: ControlPlane, cfg: ServerConfig): Promise<(() => Promise<void>) | void>;
  /** cases of the contract that do not apply to this executor, each with the reason why */
  notApplicable?: Partial<Record<ContractCase, string>>;
}

/** The contract's cases an executor may declare not applicable (with its reason). */
export type ContractCase = 'lost-agent' | 'fresh-executor';

/** One thing a reader could see of an attempt, and where it was found. */
export interface Exposure {
  site: string;
  text: string;
}

/** An executor that records every credential the inner one mints, changing nothing else. */
function capturing(inner: Executor, minted: string[]): Executor {
  return {
    name: inner.name,
    posture: inner.posture,
    warm: inner.warm?.bind(inner),
    start: (launch: AttemptLaunch) =>
      inner.start({
        ...launch,
        credential: {
          mint: async () => {
            const token = await launch.credential.mint();
            minted.push(token);
            return token;
          },
        },
      }),
    probeClaim: inner.probeClaim?.bind(inner),
    terminate: (id, tryNumber) => inner.terminate(id, tryNumber),
    onAgentExit: (listener) => inner.onAgentExit(listener),
    running: () => inner.running(),
    close: () => inner.close(),
  };
}

async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | false>,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * The behaviour every executor owes the control plane, run against a real control plane (real
 * store, agent port and scheduler on the system clock) with real agents: start, the task's
 * report, heartbeats renewing the credential, terminate, the execution timeout, a lost agent,
 * what a restarted control plane's executor can tell, and a credential that is never in env,
 * argv or files. The Kubernetes and runner executors must pass it too.
 */
export function executorContract(subject: ContractSubject): void {
  describe(`executor contract: ${subject.kind}${subject.label ? ` (${subject.label})` : ''}`, () => {
    let dir: string;
    let cfg: ServerConfig;
    let cp: ControlPlane;
    const minted: string[] = [];
    let dagCount = 0;
    let stopStarted: (() => Promise<void>) | void = undefined;
    const caseIt = (id: ContractCase, name: string, fn: () => Promise<void>) => {
      const reason = subject.notApplicable?.[id];
      if (reason) it.skip(`${name} — not applicable: ${reason}`, fn);
      else it(name, fn);
    };

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), `leoflow-contract-${subject.kind}-`));
      cfg = defaultServerConfig(join(dir, 'data'));
      cfg.http.port = 0;
      cfg.agent.port = 0;
      cfg.metrics.port = null;
      cfg.execution.heartbeatIntervalMs = 1_000;
      cfg.execution.agentLostThresholdMs = 6_000;
      cfg.execution.dispatchLostThresholdMs = 20_000;
      cfg.execution.timeoutGraceMs = 2_000;
      cfg.execution.schedulerTickMs = 50;
      subject.configure?.(cfg);
      cp = await startControlPlane(cfg, {
        logger: pino({ level: 'silent' }),
        ...(subject.create ? { executor: subject.create(cfg) } : {}),
        decorateExecutor: (e) => capturing(e, minted),
      });
      stopStarted = await subject.started?.(cp, cfg);
    }, 60_000);

    afterAll(async () => {
      if (stopStarted) await stopStarted();
      await cp?.close();
      rmSync(dir, { recursive: true, force: true });
    }, 60_000);

    async function runOne(
      command: string,
      extra: Partial<DagSpec['tasks'][number]> = {},
    ): Promise<DagRunRow> {
      const s = spec({
        dag_id: `contract_${++dagCount}`,
        tasks: [task('work', { command, ...extra })],
      });
      await cp.store.putDagVersion('default', s, dagSpecHash(s), Date.now());
      return cp.runs.trigger('default', s.dag_id, {});
    }

    const ti = async (run: DagRunRow) => (await cp.store.getTaskInstance(run.id, 'work'))!;
    const ended = (run: DagRunRow, timeoutMs?: number) =>
      waitFor(
        'the attempt to end',
        async () => {
          const row = await ti(run);
          return !isActive(row.state) && row.state !== 'scheduled' && row.state !== 'none'
            ? row
            : undefined;
        },
        timeoutMs,
      );
    const running = (run: DagRunRow) =>
      waitFor('the attempt to run', async () => {
        const row = await ti(run);
        return row.state === 'running' && row.pid !== null ? row : undefined;
      });

    it('reports the posture its kind reports for this configuration', () => {
      expect(cp.executor.posture).toEqual(EXECUTOR_KINDS.get(subject.kind)?.posture(cfg));
    });

    it('starts the agent and the task, and the success lands with exit code 0', async () => {
      const run = await runOne('echo contract-ok');
      const row = await ended(run);
      expect([row.state, row.exit_code, row.try_number]).toEqual(['success', 0, 1]);
      expect(row.executor).toBe(cp.executor.name);
      const logs = await cp.store.readLogs(run.id, 'work', 1, 0, 100);
      expect(logs.map((l) => l.message)).toContain('contract-ok');
    });

    it("reports a failing task's exit code", async () => {
      const row = await ended(await runOne('exit 3'));
      expect([row.state, row.exit_code]).toEqual(['failed', 3]);
    });

    it('heartbeats while the task runs, and each heartbeat renews the credential; a finished attempt leaves nothing behind', async () => {
      const run = await runOne('sleep 3');
      const started = await running(run);
      const attempt = await subject.watchAttempt(cp, started);
      const row = await ended(run);
      expect(row.state).toBe('success');
      // Its processes exit and whatever was created for it (a pod) is cleaned up.
      await waitFor('nothing of the finished attempt to be left', () => attempt.gone());
      expect(row.last_heartbeat_at!).toBeGreaterThan(started.started_at!);
      const [record] = await cp.store.listAttemptRecords(run.id, 'work');
      expect(record?.renewals).toBeGreaterThanOrEqual(1);
    });

    it('terminate stops the agent and its task, and the attempt fails', async () => {
      const run = await runOne('sleep 60');
      const live = await running(run);
      const owner = cp.executors.owner(live.executor);
      expect(owner?.name).toBe(cp.executor.name);
      const attempt = await subject.watchAttempt(cp, live);
      expect(await attempt.gone()).toBe(false);
      await owner!.terminate(live.id, live.try_number);
      const row = await ended(run);
      expect(row.state).toBe('failed');
      await waitFor('nothing of the attempt to be left', () => attempt.gone());
    });

    it('ends an attempt past its execution timeout', async () => {
      const run = await runOne('sleep 60', { execution_timeout_seconds: 1 });
      const row = await ended(run);
      expect(row.state).toBe('failed');
      expect(row.error_message ?? '').toMatch(/timeout|timed out/i);
    });

    caseIt('lost-agent', 'a lost agent fails its attempt at once, and retries apply', async () => {
      const run = await runOne('sleep 5', { retries: 1, retry_delay_seconds: 3600 });
      const live = await running(run);
      await subject.killAgent(cp, live);
      const row = await waitFor('the retry to be scheduled', async () => {
        const r = await ti(run);
        return r.try_number === 2 ? r : undefined;
      });
      expect(row.state).toBe('up_for_retry');
      const [first] = await cp.store.listTaskInstanceHistory(run.id, 'work');
      expect(first?.error_message ?? '').toMatch(/agent exited/);
    });

    caseIt(
      'fresh-executor',
      'a fresh executor of the same kind (a restart) tells a live agent from a gone one',
      async () => {
        const run = await runOne('sleep 3');
        const live = await running(run);
        const fresh = subject.fresh(cp, cfg);
        try {
          expect(fresh.name).toBe(cp.executor.name);
          expect(typeof fresh.probeClaim).toBe('function');
          const claim: PendingClaim = {
            task_instance_id: live.id,
            try_number: live.try_number,
            dispatch_gen: live.dispatch_gen,
            hostname: live.hostname,
            pid: live.pid,
            queued_at: live.queued_at!,
          };
          expect((await fresh.probeClaim!(claim, Date.now())).state).toBe('alive');
          expect((await ended(run)).state).toBe('success');
          await waitFor('the agent to be gone', async () =>
            (await fresh.probeClaim!(claim, Date.now())).state === 'gone' ? true : undefined,
          );
        } finally {
          await fresh.close();
        }
      },
    );

    const sites = subject.credentialSites ?? [];
    it(
      sites.length === 0
        ? 'never puts the credential in the env, argv or files of the attempt'
        : `puts the credential only where its transport says (${sites.join(', ')})`,
      async () => {
        const before = minted.length;
        const run = await runOne('sleep 2');
        const live = await running(run);
        const seen = await subject.exposure(cp, live);
        expect((await ended(run)).state).toBe('success');
        const tokens = minted.slice(before);
        expect(tokens.length).toBeGreaterThanOrEqual(1);
        // The exposure really covers the running agent (its env names the agent URL).
        const agentUrl = subject.podAgentUrl ?? cp.agentUrl;
        expect(seen.some((e) => e.text.includes(agentUrl))).toBe(true);
        const holding = (e: Exposure) =>
          tokens.some((t) => e.text.includes(t) || e.text.includes(t.split('.')[2]!));
        // Two-sided: every declared site holds the credential (the transport really is the one
        // named), and no other site does.
        for (const site of sites) {
          const found = seen.filter((e) => e.site === site);
          expect(found.length, site).toBeGreaterThan(0);
          expect(found.some(holding), site).toBe(true);
        }
        expect(
          seen.filter((e) => !sites.includes(e.site) && holding(e)).map((e) => e.site),
        ).toEqual([]);
      },
    );
  });
}
