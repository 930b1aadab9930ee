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
  XComRow,
} from './types.js';
export type { VaultStore } from './vault-store.js';
export type {
  AuditRecord,
  ConnectionRecord,
  NewAuditRecord,
  SealedKind,
  SealedRef,
  VariableRecord,
} from './vault-types.js';
