import type { Migration, MigrationProvider } from 'kysely';
import { dialectTypes, type StoreDialect } from './migrations/dialect.js';
import { migration0001Initial } from './migrations/0001_initial.js';
import { migration0002Vault } from './migrations/0002_vault.js';
import { migration0003ApiTokens } from './migrations/0003_api_tokens.js';
import { migration0004DispatchGeneration } from './migrations/0004_dispatch_generation.js';
import { migration0005AttemptRecords } from './migrations/0005_attempt_records.js';
import { migration0006TaskInstanceExecutor } from './migrations/0006_task_instance_executor.js';
import { migration0007RenewalOnHeartbeat } from './migrations/0007_renewal_on_heartbeat.js';
import { migration0008SchedulerLease } from './migrations/0008_scheduler_lease.js';
import { migration0009UiSessions } from './migrations/0009_ui_sessions.js';
import { migration0010WarmPoolMembers } from './migrations/0010_warm_pool_members.js';
import { migration0011AttemptExchange } from './migrations/0011_attempt_exchange.js';
import { migration0012AttemptRevocation } from './migrations/0012_attempt_revocation.js';
import { migration0013SecretGrants } from './migrations/0013_secret_grants.js';
import { migration0014SecretMasking } from './migrations/0014_secret_masking.js';
import { migration0015TaskMapping } from './migrations/0015_task_mapping.js';
import { migration0016ReplicasAndLeaseTerms } from './migrations/0016_replicas_and_lease_terms.js';
import { migration0017PrevSuccessIndex } from './migrations/0017_prev_success_index.js';
import { migration0018DagFolder } from './migrations/0018_dag_folder.js';

export type { StoreDialect };

/**
 * The one ordered migration list for both dialects. Names sort lexically, which is the order
 * Kysely applies them in; never rename or edit a released entry, append a new one.
 */
export function migrations(dialect: StoreDialect): Record<string, Migration> {
  const t = dialectTypes(dialect);
  return {
    '0001_initial': migration0001Initial(t),
    '0002_vault': migration0002Vault(t),
    '0003_api_tokens': migration0003ApiTokens(),
    '0004_dispatch_generation': migration0004DispatchGeneration(),
    '0005_attempt_records': migration0005AttemptRecords(),
    '0006_task_instance_executor': migration0006TaskInstanceExecutor(),
    '0007_renewal_on_heartbeat': migration0007RenewalOnHeartbeat(),
    '0008_scheduler_lease': migration0008SchedulerLease(),
    '0009_ui_sessions': migration0009UiSessions(),
    '0010_warm_pool_members': migration0010WarmPoolMembers(t),
    '0011_attempt_exchange': migration0011AttemptExchange(),
    '0012_attempt_revocation': migration0012AttemptRevocation(),
    '0013_secret_grants': migration0013SecretGrants(),
    '0014_secret_masking': migration0014SecretMasking(),
    '0015_task_mapping': migration0015TaskMapping(t),
    '0016_replicas_and_lease_terms': migration0016ReplicasAndLeaseTerms(t),
    '0017_prev_success_index': migration0017PrevSuccessIndex(),
    '0018_dag_folder': migration0018DagFolder(t),
  };
}

export function migrationProvider(dialect: StoreDialect): MigrationProvider {
  return { getMigrations: () => Promise.resolve(migrations(dialect)) };
}
