/**
 * Agent diagnostics go to the agent's own stderr, which the executor redirects to a per-attempt
 * diagnostics file. Nothing secret may be passed here: callers log names, codes and counts only.
 */
export type DiagLevel = 'info' | 'warn' | 'error';

export interface Diagnostics {
  log(level: DiagLevel, message: string): void;
}

export function stderrDiagnostics(pid: number = process.pid): Diagnostics {
  return {
    log(level, message) {
      // One line per event keeps the file greppable even if a message carries a newline.
      const oneLine = message.replace(/[\r\n]+/g, ' ');
      process.stderr.write(
        `${new Date().toISOString()} leoflow-agent[${pid}] ${level} ${oneLine}\n`,
      );
    },
  };
}

export const silentDiagnostics: Diagnostics = { log() {} };
