import { writeSync } from 'node:fs';
import { LeoflowError } from '@leoflow/core';
import type { Logger } from 'pino';

/**
 * Test-only crash points along dispatch and report. When armed, the control plane SIGKILLs
 * itself the first time it reaches the named point, so an end-to-end test can restart it on the
 * same data directory and check what survived (test/security/crash-recovery.test.ts).
 *
 * | point             | where the process dies                                                        |
 * | ----------------- | ----------------------------------------------------------------------------- |
 * | `before_spawn`    | attempt claimed (`queued`) and its token minted; no agent started             |
 * | `after_spawn`     | agent process started with its assignment; it has not registered yet          |
 * | `after_register`  | Register committed (`running`); the agent has not had the answer              |
 * | `after_task_exit` | the task exited; its agent's first call after that (PushXCom) is not stored   |
 * | `before_report`   | ReportState received, not applied                                             |
 * | `after_report`    | ReportState applied; the agent has not had the answer                         |
 *
 * Two variables are needed, so production cannot trip it by accident: `LEOFLOW_TEST_FAULT=<point>`
 * names the point, and `LEOFLOW_TEST_FAULT_ARM` must be exactly `sigkill-this-process`. Either one
 * alone does nothing (the point alone is logged as ignored). An armed process logs a warning at
 * boot; an unknown point refuses to boot. Agents never see these variables (the executor passes
 * them a fixed, minimal environment).
 */
export const FAULT_POINTS = [
  'before_spawn',
  'after_spawn',
  'after_register',
  'after_task_exit',
  'before_report',
  'after_report',
] as const;

export type FaultPoint = (typeof FAULT_POINTS)[number];

export const FAULT_ENV = 'LEOFLOW_TEST_FAULT';
export const FAULT_ARM_ENV = 'LEOFLOW_TEST_FAULT_ARM';
export const FAULT_ARM_VALUE = 'sigkill-this-process';

export interface FaultInjector {
  /** the armed point, or null */
  readonly armed: FaultPoint | null;
  /** Dies (SIGKILL, no cleanup) when `point` is the armed one; otherwise does nothing. */
  hit(point: FaultPoint): void;
}

export const NO_FAULTS: FaultInjector = { armed: null, hit: () => undefined };

export function faultsFromEnv(
  env: Record<string, string | undefined>,
  logger: Logger,
): FaultInjector {
  const point = env[FAULT_ENV];
  if (point === undefined || point === '') return NO_FAULTS;
  if (env[FAULT_ARM_ENV] !== FAULT_ARM_VALUE) {
    logger.warn(
      { [FAULT_ENV]: point },
      `${FAULT_ENV} is ignored: test fault injection is armed only together with ${FAULT_ARM_ENV}=${FAULT_ARM_VALUE}`,
    );
    return NO_FAULTS;
  }
  if (!(FAULT_POINTS as readonly string[]).includes(point)) {
    throw new LeoflowError(
      'LF_TEST_FAULT_UNKNOWN',
      `${FAULT_ENV}=${JSON.stringify(point)} is not a fault point; use one of ${FAULT_POINTS.join(', ')}, or unset it`,
    );
  }
  const armed = point as FaultPoint;
  logger.warn(
    { point: armed },
    `TEST FAULT INJECTION ARMED: this process will SIGKILL itself at "${armed}"; never set ${FAULT_ARM_ENV} outside tests`,
  );
  return {
    armed,
    hit(p) {
      if (p !== armed) return;
      // Synchronous, so the line is out before the process is.
      writeSync(2, `leoflow: test fault "${p}": SIGKILL\n`);
      process.kill(process.pid, 'SIGKILL');
    },
  };
}
