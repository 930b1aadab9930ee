import { CliError } from './client.js';

/** "15s", "500ms", "2m", "1h" or a bare number of seconds → milliseconds. */
export function parseDurationMs(value: string, setting: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(value.trim());
  if (!m) {
    throw new CliError(
      `${setting} must be a duration like 15s, 500ms, 2m or 1h (got "${value}")`,
      2,
      'LF_CONFIG_INVALID',
    );
  }
  const n = Number(m[1]);
  const unit = m[2] ?? 's';
  const factor = unit === 'ms' ? 1 : unit === 's' ? 1000 : unit === 'm' ? 60_000 : 3_600_000;
  return Math.round(n * factor);
}
