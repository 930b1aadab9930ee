/**
 * Reconnect delay after `failures` consecutive failures: exponential from 500 ms, capped at
 * 30 s, with full jitter over the upper half so a cell restart does not get every runner back
 * in the same instant.
 */
export function reconnectDelayMs(failures: number, random: () => number = Math.random): number {
  const ceiling = Math.min(30_000, 500 * 2 ** Math.min(failures, 16));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}
