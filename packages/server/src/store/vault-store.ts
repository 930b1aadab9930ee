import type { AttemptCredentialStore } from './ports/attempt-credentials.js';
import type { AuditStore } from './ports/audit.js';
import type { ConnectionStore } from './ports/connections.js';
import type { SealedValueStore } from './ports/sealed-values.js';
import type { VariableStore } from './ports/variables.js';

/** Variables, Connections, key rotation, the audit log and attempt-credential revocation. */
export interface VaultStore
  extends VariableStore, ConnectionStore, SealedValueStore, AuditStore, AttemptCredentialStore {}
