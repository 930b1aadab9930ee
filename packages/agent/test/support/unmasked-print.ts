/**
 * How a test task shows the secrets it received. The agent masks every delivered value in the
 * task's log (issue 34), so a task that echoed them would show `***`; these tasks print their line
 * reversed through `rev` (which the masker does not look for) and the test reads it back.
 */
export const REVERSED = ' | rev';

/** The task's stdout lines as they were before `rev`. */
export function unreversed(lines: readonly string[]): string[] {
  return lines.map((l) => [...l].reverse().join(''));
}
