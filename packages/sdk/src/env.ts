import { appendFileSync } from 'node:fs';
import {
  connectionEnvName,
  LeoflowError,
  parseConnectionJson,
  parseConnectionUri,
  pyStrip,
  variableEnvName,
  type AirflowConnection,
} from '@leoflow/core';

/** Where the SDK reads from; defaults to `process.env`. Tests pass their own. */
export type Env = Record<string, string | undefined>;

export interface EnvOption {
  env?: Env;
}

/**
 * A connection as the task received it, plus the id it was looked up by: the fields Airflow's own
 * `Connection` gives for the same value (`""` and `null` kept apart; `conn_type` `null` only for
 * the JSON form without one).
 */
export interface TaskConnection extends AirflowConnection {
  conn_id: string;
}

export interface GetConnectionOptions extends EnvOption {
  /**
   * Told about what Airflow accepts but is probably a mistake (a JSON connection without
   * conn_type). Defaults to a process warning (stderr); the text never holds a value.
   */
  warn?: (message: string) => void;
}

function declareHint(kind: 'connections' | 'variables', name: string): string {
  return (
    `The task probably did not declare it in leoflow.yaml. Add \`${kind}: [${name}]\` under the task ` +
    `(or under the DAG, for every task), and make sure the ${kind === 'connections' ? 'connection' : 'variable'} exists in the vault.`
  );
}

/**
 * D5: notes a name (never a value) the task read, in the file the agent names in
 * LEOFLOW_SECRET_READS_FILE; the agent reports it and, under secret_scoping=permissive, the
 * server audits a name the DAG did not declare. Best-effort: never fails the read.
 */
function noteRead(env: Env, kind: 'variable' | 'connection', name: string): void {
  const file = env.LEOFLOW_SECRET_READS_FILE;
  if (file === undefined || file === '' || !/^[A-Za-z0-9_.-]{1,250}$/.test(name)) return;
  try {
    appendFileSync(file, `${kind} ${name}\n`, { mode: 0o600 });
  } catch {
    // not writable: the read still succeeds, it just goes unrecorded
  }
}

/**
 * `AIRFLOW_CONN_<ID>` in either Airflow form: a URI, or JSON when the value starts with `{`
 * (Airflow's environment-backend rule). Parsed with the same codec as the server, and read as a
 * task on Airflow 3 reads it (the task SDK's environment backend), which the Airflow oracle
 * checks; where that SDK and Airflow's core Connection disagree, see docs/connections.md. An
 * unset or empty variable is "not found", as in Airflow's environment backend.
 */
export function getConnection(connId: string, opts: GetConnectionOptions = {}): TaskConnection {
  const env = opts.env ?? process.env;
  const name = connectionEnvName(connId);
  const value = env[name];
  if (value === undefined || value === '') {
    throw new LeoflowError(
      'LF_SDK_CONNECTION_MISSING',
      `connection "${connId}" is not in this task's environment (${name} is not set). ` +
        declareHint('connections', connId),
      { conn_id: connId, env_name: name },
    );
  }
  const warn =
    opts.warn ??
    ((m: string) =>
      process.emitWarning(`connection "${connId}": ${m}`, { code: 'LF_SDK_CONN_TYPE_MISSING' }));
  // As Airflow's environment backend: Python's strip() first (not JS trim(): the whitespace
  // sets differ), then JSON when the value starts with "{", else a URI.
  const stripped = pyStrip(value);
  const conn: AirflowConnection = stripped.startsWith('{')
    ? parseConnectionJson(stripped, { warn })
    : parseConnectionUri(stripped);
  noteRead(env, 'connection', connId);
  return { conn_id: connId, ...conn };
}

export interface GetVariableOptions extends EnvOption {
  /** Parse the value as JSON. */
  json?: boolean;
  /** Returned instead of raising when the variable is not set. */
  default?: unknown;
}

/** `AIRFLOW_VAR_<KEY>`: the raw string, or its JSON value with `{ json: true }`. */
export function getVariable(key: string, opts: GetVariableOptions = {}): unknown {
  const env = opts.env ?? process.env;
  const name = variableEnvName(key);
  const value = env[name];
  if (value === undefined) {
    if ('default' in opts) return opts.default;
    throw new LeoflowError(
      'LF_SDK_VARIABLE_MISSING',
      `variable "${key}" is not in this task's environment (${name} is not set). ` +
        declareHint('variables', key),
      { key, env_name: name },
    );
  }
  noteRead(env, 'variable', key);
  if (opts.json !== true) return value;
  try {
    return JSON.parse(value) as unknown;
  } catch {
    // Never echo the value: a variable may hold a secret.
    throw new LeoflowError(
      'LF_SDK_VARIABLE_NOT_JSON',
      `variable "${key}" is not valid JSON; read it without { json: true } or fix its value`,
      { key },
    );
  }
}
