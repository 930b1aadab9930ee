export { openStore } from './open-store.js';
export type { OpenStoreOptions } from './open-store.js';
export type {
  AttemptFence,
  HeartbeatOutcome,
  HeartbeatRenewal,
  NewRun,
  Store,
  TaskInstanceExpectation,
  TaskInstancePatch,
} from './store.js';
export type {
  ApiTokenRow,
  AttemptKey,
  DagRow,
  DagRunRow,
  DagVersionRow,
  LogLineRow,
  LogStreamName,
  Page,
  RunType,
  TaskInstanceHistoryRow,
  TaskInstanceRow,
  TenantRow,
  WarmPoolMemberRow,
  WarmPoolRecycleReason,
  XComRow,
} from './types.js';
export type { ApiTokenStore } from './ports/api-tokens.js';
export type { AttemptCredentialStore } from './ports/attempt-credentials.js';
export type { AttemptRecordStore } from './ports/attempt-records.js';
export type { AuditStore } from './ports/audit.js';
export type { ConnectionStore } from './ports/connections.js';
export type { DagStore } from './ports/dags.js';
export type { LogStore } from './ports/logs.js';
export type { RunStore } from './ports/runs.js';
export type { RunnerTokenSealStore } from './ports/runner-token-seals.js';
export type { SealedValueStore } from './ports/sealed-values.js';
export type { SecretPathStore } from './ports/secret-path.js';
export type { TaskInstanceStore } from './ports/task-instances.js';
export type { TenantStore } from './ports/tenants.js';
export type { VariableStore } from './ports/variables.js';
export type { WarmPoolMemberStore } from './ports/warm-pool-members.js';
export type { XComStore } from './ports/xcom.js';
export type {
  AuditRecord,
  ConnectionRecord,
  NewAuditRecord,
  SealedKind,
  SealedRef,
  VariableRecord,
} from './vault-types.js';
