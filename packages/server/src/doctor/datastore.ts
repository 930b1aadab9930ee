import { redactDatabaseUrl } from './redact.js';
import { errorText, sh } from './facts.js';
import type { SectionContext } from './findings.js';
import type { KeyFilesFindings } from './key-files.js';
import type { DoctorStore } from './types.js';
import { undeclaredSecretUse } from './undeclared-use.js';

/**
 * Doctor section: the datastore — reachable (never created: a missing SQLite file is reported,
 * not opened), migrated (never migrated by doctor), SQLite's secure_delete — and, once it is
 * fully migrated, the undeclared secret use it has on record.
 */
export async function datastore(
  ctx: SectionContext,
  keyFiles: Pick<KeyFilesFindings, 'dataDirExists' | 'modes'>,
): Promise<void> {
  const { cfg, deps, check } = ctx;
  const { dataDirExists, modes } = keyFiles;
  const sqliteFile = cfg.database.kind === 'sqlite' ? cfg.database.file : null;
  const dbName =
    cfg.database.kind === 'sqlite'
      ? `the SQLite database ${cfg.database.file}`
      : `PostgreSQL at ${redactDatabaseUrl(cfg.database.url)}`;
  let store: DoctorStore | null = null;
  if (sqliteFile !== null && !dataDirExists) {
    // Reported by data_dir.exists; the database lives there.
  } else if (sqliteFile !== null && !modes.get(sqliteFile)) {
    // Missing (or not inspectable): opening it would create an empty database.
    check(
      'datastore.reachable',
      'fail',
      `there is no database at ${sqliteFile}: run \`leoflow standalone\` with this configuration once (it creates and migrates it); doctor never creates one`,
    );
  } else {
    try {
      store = await deps.openStore(cfg.database);
      check('datastore.reachable', 'ok', `opened ${dbName}`);
    } catch (err) {
      check(
        'datastore.reachable',
        'fail',
        `cannot open ${dbName}: ${errorText(err)}. ` +
          (cfg.database.kind === 'postgres'
            ? 'Check that PostgreSQL is running and --database-url / LEOFLOW_DATABASE_URL is right.'
            : 'Check the file is a Leoflow database and readable by this user.'),
      );
    }
  }
  if (store !== null) {
    try {
      const { applied, pending, unknown = [] } = await store.migrationStatus();
      if (unknown.length > 0) {
        check(
          'datastore.migrations',
          'fail',
          `the database has ${unknown.length} migration(s) this build does not know (${unknown.join(', ')}): a newer release migrated it; upgrade this installation to that release (never roll the schema back)`,
        );
      } else if (pending.length === 0) {
        check(
          'datastore.migrations',
          'ok',
          `all ${applied.length} migrations applied (latest ${applied.at(-1) ?? 'none'})`,
        );
      } else {
        check(
          'datastore.migrations',
          'fail',
          `${pending.length} migration(s) pending (${pending.join(', ')}): start \`leoflow standalone\` with this configuration once, it migrates at start (doctor never migrates)`,
        );
      }
      if (pending.length === 0 && unknown.length === 0 && store.undeclaredUse !== undefined) {
        await undeclaredSecretUse(ctx, store.undeclaredUse.bind(store));
      }
    } catch (err) {
      check('datastore.migrations', 'fail', `cannot read the migration status: ${errorText(err)}`);
    }
    if (store.secureDelete !== undefined) {
      try {
        const v = await store.secureDelete();
        if (v === 1) {
          check(
            'datastore.secure_delete',
            'ok',
            'PRAGMA secure_delete is on: freed pages are zeroed, so an overwritten or deleted secret does not linger in the file',
          );
        } else {
          check(
            'datastore.secure_delete',
            'warn',
            `PRAGMA secure_delete is ${v === 2 ? 'fast' : 'off'}: an overwritten or deleted value can linger in the file's free pages; upgrade Leoflow (it turns it on for every connection), then \`sqlite3 ${sh(sqliteFile ?? '')} 'PRAGMA secure_delete=ON; VACUUM;'\` while standalone is stopped`,
          );
        }
      } catch (err) {
        check(
          'datastore.secure_delete',
          'warn',
          `cannot read PRAGMA secure_delete: ${errorText(err)}`,
        );
      }
    }
    await store.close().catch(() => undefined);
  }
}
