import type { ErrorCodeOf } from './catalogue.js';

/**
 * Every error a user can see carries a stable code (for scripts and docs) and a message that
 * says what to do next. Messages never contain secret values. The codes, their HTTP/gRPC status
 * and their one-line fix live in ./catalogue.ts (docs/errors.md).
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

/** Configuration refused: a setting, a flag, an environment variable, a file the config names. */
export class ConfigError extends LeoflowError {
  constructor(code: ErrorCodeOf<'config'>, message: string, details?: Record<string, unknown>) {
    super(code, message, details);
    this.name = 'ConfigError';
  }
}

/** A DAG (its file, its spec, or a reference to one) is refused. */
export class DagError extends LeoflowError {
  constructor(code: ErrorCodeOf<'dag'>, message: string, details?: Record<string, unknown>) {
    super(code, message, details);
    this.name = 'DagError';
  }
}

/** The vault: variables, connections, the secret key and its keyring. */
export class VaultError extends LeoflowError {
  constructor(code: ErrorCodeOf<'vault'>, message: string, details?: Record<string, unknown>) {
    super(code, message, details);
    this.name = 'VaultError';
  }
}

/** Authentication and authorization: tokens, roles, tenants, signing keys, browser guards. */
export class AuthError extends LeoflowError {
  constructor(code: ErrorCodeOf<'auth'>, message: string, details?: Record<string, unknown>) {
    super(code, message, details);
    this.name = 'AuthError';
  }
}

/** An attempt that is no longer live (finished, or its lease lost) was asked to act. */
export class LivenessError extends LeoflowError {
  constructor(code: ErrorCodeOf<'liveness'>, message: string, details?: Record<string, unknown>) {
    super(code, message, details);
    this.name = 'LivenessError';
  }
}

/** The metadata store could not be opened or migrated. */
export class StoreError extends LeoflowError {
  constructor(code: ErrorCodeOf<'store'>, message: string, details?: Record<string, unknown>) {
    super(code, message, details);
    this.name = 'StoreError';
  }
}
