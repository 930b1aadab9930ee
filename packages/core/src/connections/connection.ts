/**
 * An Airflow-compatible connection. `extra` is an object (Airflow stores it as a JSON string;
 * the codec converts at the edges). Absent parts are null, never empty strings.
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
