import type { Executor } from './executor.js';
import type { AgentExit } from '../attempts/attempt-lifecycle.js';

/**
 * The executors a control plane runs, by name. Dispatch uses the default; everything that acts
 * on an existing claim (terminate, revoke, the reapers, exit bookkeeping) goes to the executor
 * recorded on the claim, so a restart — or a change of default — still reaches the agent.
 */
export class Executors {
  private readonly byName = new Map<string, Executor>();
  readonly default: Executor;

  constructor(executors: readonly Executor[], defaultName?: string) {
    if (executors.length === 0) throw new Error('at least one executor is required');
    for (const e of executors) {
      if (this.byName.has(e.name)) throw new Error(`two executors are named "${e.name}"`);
      this.byName.set(e.name, e);
    }
    const chosen = this.byName.get(defaultName ?? executors[0]!.name);
    if (!chosen) throw new Error(`no executor is named "${defaultName}"`);
    this.default = chosen;
  }

  /**
   * The executor that starts a task's attempts: the one the task names (`executor:` in its
   * spec), else the default. Undefined when the task names one this control plane does not run
   * (registration refuses such a DAG; a configuration change since can still get here).
   */
  forDispatch(taskExecutor?: string): Executor | undefined {
    return taskExecutor === undefined ? this.default : this.byName.get(taskExecutor);
  }

  /**
   * The executor holding a claim. A claim made before claims recorded their executor (null) is
   * the default's; one recorded by an executor that is not configured any more has no owner here
   * (undefined): nothing can be asked of it, and the reapers' timeouts decide.
   */
  owner(name: string | null): Executor | undefined {
    return name === null ? this.default : this.byName.get(name);
  }

  names(): string[] {
    return [...this.byName.keys()];
  }

  all(): readonly Executor[] {
    return [...this.byName.values()];
  }

  onAgentExit(listener: (exit: AgentExit) => void): void {
    for (const e of this.byName.values()) e.onAgentExit(listener);
  }

  warm(target: { agentUrl: string; heartbeatIntervalMs: number }): void {
    for (const e of this.byName.values()) e.warm?.(target);
  }

  running(): number {
    let n = 0;
    for (const e of this.byName.values()) n += e.running();
    return n;
  }

  async close(): Promise<void> {
    await Promise.all([...this.byName.values()].map((e) => e.close()));
  }

  /** A draining replica hands its agents over: released where an executor can, closed otherwise. */
  async release(): Promise<void> {
    await Promise.all([...this.byName.values()].map((e) => (e.release ?? e.close).call(e)));
  }
}
