import { CliError } from './client.js';

/** "15s", "500ms", "2m", "1h", "30d" or a bare number of seconds → milliseconds. */
export function parseDurationMs(value: string, setting: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(value.trim());
  if (!m) {
    throw new CliError(
      `${setting} must be a duration like 15s, 500ms, 2m, 1h or 30d (got "${value}")`,
      2,
      'LF_CONFIG_INVALID',
    );
  }
  const n = Number(m[1]);
  const unit = m[2] ?? 's';
  const factor =
    unit === 'ms'
      ? 1
      : unit === 's'
        ? 1000
        : unit === 'm'
          ? 60_000
          : unit === 'h'
            ? 3_600_000
            : 86_400_000;
  return Math.round(n * factor);
}
