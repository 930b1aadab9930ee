import { settlingGraceSeconds } from '@leoflow/core';
import type { ServerConfig } from '../config/server-config.js';
import type { SchedulerTimings } from '../scheduler/scheduler.js';

/**
 * The scheduler's timings from the execution config. Settling grace (how long a new leader waits
 * before reaping) is 2 × agent-lost, the value the boot ladder validates (settlingGraceSeconds).
 */
export function schedulerTimings(e: ServerConfig['execution']): SchedulerTimings {
  return {
    tickMs: e.schedulerTickMs,
    heartbeatIntervalMs: e.heartbeatIntervalMs,
    agentLostThresholdMs: e.agentLostThresholdMs,
    dispatchLostThresholdMs: e.dispatchLostThresholdMs,
    timeoutGraceMs: e.timeoutGraceMs,
    settlingGraceMs: settlingGraceSeconds(e.agentLostThresholdMs / 1000) * 1000,
  };
}
