import { LeoflowError, VaultError } from '../errors/leoflow-error.js';

export const URI_FORMAT =
  '<conn_type>://[login[:password]@]host[:port][/schema][?extra], every part percent-encoded ' +
  '(e.g. postgres://user:p%40ss@db.example.com:5432/app)';

export const JSON_FORMAT =
  '{"conn_type": "...", "host": "...", "login": "...", "password": "...", "schema": "...", ' +
  '"port": 5432, "extra": {...}} (only conn_type is required)';

/**
 * Every message here is fixed text about the *shape* of the input. Nothing from the input is
 * ever interpolated: a connection URI or JSON may carry a password anywhere, even in a part that
 * looks harmless when the user misplaced a delimiter.
 */
export function uriError(problem: string): LeoflowError {
  return new VaultError(
    'LF_CONN_URI_INVALID',
    `invalid connection URI: ${problem}; expected ${URI_FORMAT}`,
    { problem },
  );
}

export function jsonError(problem: string): LeoflowError {
  return new VaultError(
    'LF_CONN_JSON_INVALID',
    `invalid connection JSON: ${problem}; expected ${JSON_FORMAT}`,
    { problem },
  );
}

/** Raised by the formatter: the connection cannot be written as an Airflow URI. */
export function formatError(problem: string): LeoflowError {
  return new VaultError(
    'LF_CONN_URI_INVALID',
    `cannot write the connection as an Airflow URI: ${problem}`,
    { problem },
  );
}
