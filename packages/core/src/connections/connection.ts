/**
 * An Airflow-compatible connection. `extra` is an object (Airflow stores it as a JSON string;
 * the codec converts at the edges). Fields hold what Airflow's own `Connection` holds, `None`
 * and `""` kept apart: a URI gives host and schema `""` when absent, login `""` for an empty user
 * before `:` or `@` and `null` with no `@` at all; a password is never `""` (Airflow's setter
 * ignores it). See docs/connections.md.
 */
export interface Connection {
  conn_type: string;
  host: string | null;
  login: string | null;
  password: string | null;
  schema: string | null;
  port: number | null;
  extra: Record<string, unknown> | null;
}

/**
 * A connection as Airflow's `Connection.from_json` builds it: like `Connection`, except that the
 * type may be unset (`null`). Airflow's environment backend hands such a connection to a task;
 * its database, like Leoflow's vault, needs a type.
 */
export interface AirflowConnection extends Omit<Connection, 'conn_type'> {
  conn_type: string | null;
}
