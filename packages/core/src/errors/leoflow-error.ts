/**
 * Every error a user can see carries a stable code (for scripts and docs) and a message that
 * says what to do next. Messages never contain secret values.
 */
export class LeoflowError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'LeoflowError';
  }
}

export function isLeoflowError(e: unknown): e is LeoflowError {
  return e instanceof LeoflowError;
}
