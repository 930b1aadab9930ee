import { LeoflowError, ConfigError } from '../errors/leoflow-error.js';

const UNIT_SECONDS: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86_400 };
const WHOLE = /^([+-]?)((?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+)$/;
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/g;
const BARE = /^[+-]?\d+(?:\.\d+)?$/;

/**
 * A duration setting → seconds (fractional for sub-second values).
 *
 * Accepts "24h", "90s", "15m", "500ms", "30d", compound "1h30m", a bare number of seconds ("600"), and a
 * JSON/YAML number (seconds). Zero and negative values parse: whether they are meaningful is the
 * validator's call (the credential ceiling treats ≤ 0 as "disabled", the timing ladder rejects
 * them elsewhere). Anything else throws naming the key, so boot can say which setting is wrong.
 */
export function parseDuration(value: unknown, key: string): number {
  if (typeof value === 'number') {
    if (Number.isFinite(value)) return value;
    throw invalid(value, key);
  }
  if (typeof value !== 'string') throw invalid(value, key);
  const s = value.trim();
  if (BARE.test(s)) return Number(s);
  const m = WHOLE.exec(s);
  if (!m?.[2]) throw invalid(value, key);
  let total = 0;
  for (const part of m[2].matchAll(PART)) {
    total += Number(part[1]) * (UNIT_SECONDS[part[2] ?? ''] ?? Number.NaN);
  }
  if (!Number.isFinite(total)) throw invalid(value, key);
  // Round away float noise from ms arithmetic (0.1 + 0.2 style) so "1500ms" is exactly 1.5.
  const seconds = Math.round(total * 1e6) / 1e6;
  return m[1] === '-' ? -seconds : seconds;
}

/** "86400" → "24h", "90" → "90s": the shortest exact spelling, for messages and docs. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds)) return String(seconds);
  const sign = seconds < 0 ? '-' : '';
  const abs = Math.abs(seconds);
  if (abs === 0) return '0s';
  if (abs >= 3600 && abs % 3600 === 0) return `${sign}${abs / 3600}h`;
  if (abs >= 60 && abs % 60 === 0) return `${sign}${abs / 60}m`;
  if (Number.isInteger(abs)) return `${sign}${abs}s`;
  return `${sign}${Math.round(abs * 1000)}ms`;
}

function invalid(value: unknown, key: string): LeoflowError {
  const shown = typeof value === 'string' ? `"${value}"` : String(value);
  return new ConfigError(
    'LF_CONFIG_INVALID',
    `${key} must be a duration such as 90s, 15m, 24h, 500ms or a number of seconds (got ${shown})`,
    { key, value: typeof value === 'string' || typeof value === 'number' ? value : String(value) },
  );
}
