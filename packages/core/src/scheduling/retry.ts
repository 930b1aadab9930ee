import { LeoflowError } from '../errors/leoflow-error.js';
import { sha1Hex } from './sha1.js';

export interface FailureInput {
  /** the try that just failed; the first attempt is try 1 */
  tryNumber: number;
  /** retries + 1 */
  maxTries: number;
  retryDelaySeconds: number;
  /** epoch ms at which the failure is recorded */
  now: number;
  /** exponential backoff (retryBackoffSeconds); absent = the constant retryDelaySeconds */
  backoff?: RetryBackoff;
}

/** What Airflow's exponential backoff needs besides the base delay and the failed try. */
export interface RetryBackoff {
  /** retry_exponential_backoff: the multiplier (0 and 1 mean a constant delay) */
  multiplier: number;
  /** max_retry_delay in seconds; absent = no cap but MAX_TASK_RETRY_DELAY_SECONDS */
  maxRetryDelaySeconds?: number;
  /** the identity Airflow hashes for the jitter: `{dag_id}#{task_id}#{logical_date}#{try}` */
  dagId: string;
  taskId: string;
  /** epoch ms of the run's logical date; null for a run without one (Airflow hashes "None") */
  logicalDate: number | null;
}

/** Airflow's [core] max_task_retry_delay default (24 h): no backoff delay exceeds it. */
export const MAX_TASK_RETRY_DELAY_SECONDS = 24 * 60 * 60;

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
  const delay =
    input.backoff === undefined
      ? retryDelaySeconds
      : retryBackoffSeconds({ ...input.backoff, retryDelaySeconds, tryNumber });
  return { kind: 'retry', retryAt: now + Math.round(delay * 1000) };
}

/**
 * The delay before the next try, as Airflow 3 computes it (models/taskinstance.py
 * `next_retry_datetime`, apache-airflow-core 3.3.2), in seconds:
 *
 * - multiplier 0 or 1 (or negative): the constant retry delay;
 * - otherwise `min_backoff = ceil(delay × multiplier^(try − 1))`, at least 1; a jitter
 *   `sha1("{dag_id}#{task_id}#{logical_date}#{try}") mod min_backoff` is added, so the delay lies
 *   in [min_backoff, 2 × min_backoff) and is the same for the same try of the same task instance;
 *   the result is capped at MAX_TASK_RETRY_DELAY_SECONDS, then at max_retry_delay.
 *
 * `logical_date` is written as Python's str() of a UTC datetime (`2026-01-01 06:30:00+00:00`,
 * microseconds only when non-zero). Leoflow's map indexes share the jitter of their task, as in
 * Airflow (the hash does not include the map index).
 */
export function retryBackoffSeconds(
  input: RetryBackoff & { retryDelaySeconds: number; tryNumber: number },
): number {
  const { multiplier, retryDelaySeconds: delay, tryNumber } = input;
  if (!(multiplier > 0) || multiplier === 1) return delay;
  let minBackoff = Math.ceil(delay * multiplier ** (tryNumber - 1));
  // Python raises OverflowError where a double overflows; Airflow then uses its ceiling.
  if (!Number.isFinite(minBackoff)) minBackoff = MAX_TASK_RETRY_DELAY_SECONDS;
  if (minBackoff < 1) minBackoff = 1;
  const key = `${input.dagId}#${input.taskId}#${pythonDateStr(input.logicalDate)}#${tryNumber}`;
  const hash = BigInt(`0x${sha1Hex(key)}`);
  // minBackoff may exceed 2^53 (a long delay, many tries): BigInt keeps Python's exact integer
  // arithmetic for the modulo (a finite integral double converts exactly); the sum is capped.
  const modded = minBackoff + Number(hash % BigInt(minBackoff));
  let seconds = Math.min(modded, MAX_TASK_RETRY_DELAY_SECONDS);
  if (input.maxRetryDelaySeconds !== undefined && input.maxRetryDelaySeconds > 0) {
    seconds = Math.min(seconds, input.maxRetryDelaySeconds);
  }
  return seconds;
}

/** Python's str() of an aware UTC datetime: `YYYY-MM-DD HH:MM:SS[.ffffff]+00:00`, or "None". */
function pythonDateStr(ms: number | null): string {
  if (ms === null) return 'None';
  const iso = new Date(ms).toISOString(); // YYYY-MM-DDTHH:MM:SS.mmmZ
  const frac = ms % 1000 === 0 ? '' : `.${iso.slice(20, 23)}000`;
  return `${iso.slice(0, 10)} ${iso.slice(11, 19)}${frac}+00:00`;
}

function invalid(name: string, value: number, want: string): LeoflowError {
  return new LeoflowError('LF_INVALID_ARGUMENT', `${name} must be ${want}, got ${String(value)}.`, {
    [name]: value,
  });
}
