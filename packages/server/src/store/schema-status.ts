import { StoreError } from '@leoflow/core';

/**
 * Where the database's schema stands against the migrations this build knows. `current` is
 * what a replica needs before it serves: every known migration applied and none it does not
 * know. `unknown` (applied by a newer release) is the one a replica must never start on.
 */
export interface SchemaStatus {
  current: boolean;
  /** Names the database has applied, in name order (including ones this build does not know). */
  applied: string[];
  /** Names this build ships, in the order they apply. */
  known: string[];
  /** Known to this build, not yet applied. */
  pending: string[];
  /** Applied in the database, not shipped by this build: the schema is newer than this code. */
  unknown: string[];
}

/** What a store reports about its bookkeeping (Store.migrationStatus). */
export interface MigrationBookkeeping {
  applied: string[];
  pending: string[];
  unknown?: string[];
}

/** Anything that can report its migration bookkeeping: the Store, or a narrower handle. */
export interface MigrationStatusSource {
  migrationStatus(): Promise<MigrationBookkeeping>;
}

/** Pure: the status from the build's list and the database's applied names. */
export function compareSchema(known: readonly string[], applied: readonly string[]): SchemaStatus {
  const knownSet = new Set(known);
  const appliedSet = new Set(applied);
  const pending = known.filter((name) => !appliedSet.has(name));
  const unknown = [...appliedSet].filter((name) => !knownSet.has(name)).sort();
  return {
    current: pending.length === 0 && unknown.length === 0,
    applied: [...appliedSet].sort(),
    known: [...known],
    pending,
    unknown,
  };
}

/**
 * Reads the store's status for `/readyz` and `leoflow doctor`. Read-only: it never creates the
 * bookkeeping tables nor applies a migration.
 */
export async function schemaStatus(store: MigrationStatusSource): Promise<SchemaStatus> {
  const { applied, pending, unknown = [] } = await store.migrationStatus();
  const appliedKnown = new Set(applied);
  // Store.migrationStatus reports the known list split in two; rebuild it in apply order.
  const known = [...applied, ...pending].sort();
  return compareSchema(known, [...appliedKnown, ...unknown]);
}

/**
 * The refusal of a replica whose code is older than the database: it would write rows the newer
 * schema's invariants do not expect, and rolling the schema back would lose the newer
 * replicas' data. Names both sides so the operator knows which release to run.
 */
export function schemaNewerError(status: SchemaStatus, dialect: string): StoreError {
  const databaseNewest = [...status.applied].sort().at(-1) ?? '(none)';
  const buildNewest = status.known.at(-1) ?? '(none)';
  return new StoreError(
    'LF_STORE_SCHEMA_NEWER',
    `the ${dialect} database's schema is newer than this Leoflow build: its newest migration is ` +
      `${databaseNewest}, this build's newest is ${buildNewest} (unknown here: ` +
      `${status.unknown.join(', ')}). Upgrade this replica to the release that ships ` +
      `${databaseNewest}; never roll the schema back.`,
    {
      dialect,
      database_newest: databaseNewest,
      build_newest: buildNewest,
      unknown: status.unknown,
    },
  );
}
