/** Operator caps on what PushLogs stores (config keys `logs.*`, see docs/configuration.md). */
export interface LogLimits {
  /** a longer message keeps its head and a marker saying how many bytes were cut */
  maxLineBytes: number;
  /** past this many stored bytes an attempt's lines are counted, not stored */
  maxBytesPerAttempt: number;
  /** how long after an attempt ended it may still write log lines */
  writeGraceMs: number;
}

export const DEFAULT_LOG_LIMITS: LogLimits = {
  // Above the agent's own 64 KiB cut plus its marker, so a Leoflow agent's lines pass unchanged.
  maxLineBytes: 128 * 1024,
  maxBytesPerAttempt: 256 * 1024 * 1024,
  writeGraceMs: 5 * 60_000,
};
