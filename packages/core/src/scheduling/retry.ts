import { LeoflowError } from '../errors/leoflow-error.js';

export interface FailureInput {
  /** the try that just failed; the first attempt is try 1 */
  tryNumber: number;
  /** retries + 1 */
  maxTries: number;
  retryDelaySeconds: number;
  /** epoch ms at which the failure is recorded */
  now: number;
}

export type FailureDecision = { kind: 'retry'; retryAt: number } | { kind: 'fail' };

/** A task's total attempt budget: the first try plus its retries. */
export function maxTriesFor(retries: number): number {
  if (!Number.isInteger(retries) || retries < 0) {
    throw invalid('retries', retries, 'a whole number ≥ 0');
  }
  return retries + 1;
}

/**
 * What to do with an attempt that just failed (its own failure, a timeout, or a reaper finding
 * it lost): retry while tries remain, `retryDelaySeconds` after `now`; otherwise fail for good.
 * A try beyond the budget (possible if retries was lowered by a newer DAG version bound on
 * clear) simply fails.
 */
export function afterFailure(input: FailureInput): FailureDecision {
  const { tryNumber, maxTries, retryDelaySeconds, now } = input;
  if (!Number.isInteger(tryNumber) || tryNumber < 1) {
    throw invalid('tryNumber', tryNumber, 'a whole number ≥ 1');
  }
  if (!Number.isInteger(maxTries) || maxTries < 1) {
    throw invalid('maxTries', maxTries, 'a whole number ≥ 1 (retries + 1)');
  }
  if (!Number.isFinite(retryDelaySeconds) || retryDelaySeconds < 0) {
    throw invalid('retryDelaySeconds', retryDelaySeconds, 'a finite number ≥ 0');
  }
  if (!Number.isFinite(now)) throw invalid('now', now, 'finite epoch milliseconds');
  if (tryNumber >= maxTries) return { kind: 'fail' };
  return { kind: 'retry', retryAt: now + Math.round(retryDelaySeconds * 1000) };
}

function invalid(name: string, value: number, want: string): LeoflowError {
  return new LeoflowError('LF_INVALID_ARGUMENT', `${name} must be ${want}, got ${String(value)}.`, {
    [name]: value,
  });
}
