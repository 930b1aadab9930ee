import type { Clock } from '@leoflow/core';

export const systemClock: Clock = { now: () => Date.now(), monotonicNow: () => performance.now() };
