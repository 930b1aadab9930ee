import type { ApiTokenStore } from './ports/api-tokens.js';
import type { AttemptCredentialStore } from './ports/attempt-credentials.js';
import type { AttemptRecordStore } from './ports/attempt-records.js';
import type { AuditStore } from './ports/audit.js';
import type { ConnectionStore } from './ports/connections.js';
import type { DagStore } from './ports/dags.js';
import type { LogStore } from './ports/logs.js';
import type { RunStore } from './ports/runs.js';
import type { SealedValueStore } from './ports/sealed-values.js';
import type { SecretGrantStore } from './ports/secret-grants.js';
import type { TaskInstanceStore } from './ports/task-instances.js';
import type { TenantStore } from './ports/tenants.js';
import type { UiSessionStore } from './ports/ui-sessions.js';
import type { VariableStore } from './ports/variables.js';
import type { WarmPoolMemberStore } from './ports/warm-pool-members.js';
import type { XComStore } from './ports/xcom.js';

export type { NewRun, RunSpecRef } from './ports/runs.js';
export type {
  AttemptFence,
  HeartbeatOutcome,
  HeartbeatRenewal,
  TaskInstanceExpectation,
  TaskInstancePatch,
} from './ports/task-instances.js';

/**
 * The persistence port: every role port (store/ports/*.ts, one per seam) plus the lifecycle.
 * One implementation (Kysely, store/kysely/*.ts composed in kysely-store.ts) serves SQLite and
 * PostgreSQL; the same storage suite runs against both. A consumer that needs only a few
 * methods takes the narrowest port that has them, not this.
 */
export interface Store
  extends
    TenantStore,
    ApiTokenStore,
    DagStore,
    RunStore,
    TaskInstanceStore,
    AttemptRecordStore,
    XComStore,
    LogStore,
    VariableStore,
    ConnectionStore,
    SealedValueStore,
    AuditStore,
    AttemptCredentialStore,
    UiSessionStore,
    WarmPoolMemberStore,
    SecretGrantStore {
  readonly dialect: 'sqlite' | 'postgres';
  /**
   * Applies pending migrations, once across replicas (PostgreSQL: under an advisory lock), and
   * refuses a database migrated by a newer release (LF_STORE_SCHEMA_NEWER).
   */
  migrate(): Promise<void>;
  /**
   * Which migrations of this build the database has applied, which are still pending, and
   * which it has applied that this build does not know (a newer release migrated it).
   * Read-only: it never creates the bookkeeping tables nor applies anything (`leoflow doctor`).
   */
  migrationStatus(): Promise<{ applied: string[]; pending: string[]; unknown: string[] }>;
  close(): Promise<void>;
}
