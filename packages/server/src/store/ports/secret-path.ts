import type { AttemptCredentialStore } from './attempt-credentials.js';
import type { AttemptRecordStore } from './attempt-records.js';
import type { AuditStore } from './audit.js';
import type { RunStore } from './runs.js';

/**
 * What the agent secret path (GetVariables / GetConnections, attempts/secret-delivery.ts)
 * asks of the store itself: the attempt's liveness and revocation, the run's spec reference
 * (to find the declared names), the attempt's record (once-per-attempt undeclared reads) and
 * the audit of a refusal. The values come through the vault, not from here. On SQLite the two
 * reads every fetch makes, liveness and the spec reference, are served by sqlite-hot-reads.ts.
 */
export type SecretPathStore = Pick<
  AttemptCredentialStore,
  'getAttemptLiveness' | 'isAttemptRecordRevoked'
> &
  Pick<RunStore, 'getRunSpecRef'> &
  Pick<AttemptRecordStore, 'getAttemptRecord' | 'noteUndeclaredReads'> &
  Pick<AuditStore, 'appendAudit'>;
