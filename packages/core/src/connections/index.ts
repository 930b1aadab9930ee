export * from './connection.js';
export {
  parseConnectionUri,
  formatConnectionUri,
  normalizeConnection,
  normalizeConnType,
  EXTRA_QUERY_KEY,
} from './uri.js';
export {
  parseConnectionJson,
  CONNECTION_JSON_FIELDS,
  CONN_TYPE_MISSING_WARNING,
  requireConnType,
  type ParseConnectionJsonOptions,
} from './json.js';
export { URI_FORMAT, JSON_FORMAT } from './errors.js';
export { connectionEnvName, CONN_ENV_PREFIX } from './env-name.js';
export {
  parseAirflowConnectionsExport,
  type ImportedConnection,
  type ConnectionsExportFormat,
} from './import.js';
export type { ImportIssue } from './import-issues.js';
export { fromAirflowEnv } from './airflow-env.js';
export { formatAirflowConnectionsExport } from './export.js';
export { pyStrip } from './py-str.js';
export {
  isSensitiveKey,
  redactConnectionExtra,
  redactConnection,
  DEFAULT_SENSITIVE_FIELDS,
  isNonSecretExtraField,
  NON_SECRET_EXTRA_FIELDS,
  MASK,
} from './masking.js';
export {
  resolveGcpConnectionFields,
  GCP_CONN_TYPE,
  GCP_LEGACY_PREFIX,
  GCP_CREDENTIAL_ORDER,
  GCP_DEFAULT_NUM_RETRIES,
  GCP_BARE_SECRET_NAME,
  type GcpConnectionFields,
  type GcpCredentialSource,
} from './gcp.js';
export {
  checkConnectionStructure,
  type ConnectionCheck,
  type ConnectionCheckResult,
  type ConnectionCheckInput,
} from './check.js';
