import { join } from 'node:path';
import { keyringFile } from '../auth/signing-keys.js';
import { ADMIN_TOKEN_FILE } from '../config/data-dir-layout.js';
import {
  liteKeyringPath,
  SECRET_KEY_ENV,
  SECRET_KEY_PREVIOUS_ENV,
  SECRET_KEYRING_FILE_ENV,
  type KeyringSource,
} from '../vault/load-keyring.js';
import { parseSecretKey } from '../vault/secret-key.js';
import { errorText, isInside, octal, ownerCheck, sh } from './facts.js';
import type { SectionContext } from './findings.js';
import type { DoctorDeps, FileInfo, Posture } from './types.js';

/**
 * Doctor section: the data directory and the key files in and around it — their existence,
 * modes and owner, where the vault key comes from, and the exposures of where keys sit (beside
 * the database, in the environment) and of the admin token.
 */

export interface KeyFilesFindings {
  dataDirExists: boolean;
  /** what each inspected path was (null: absent), for the datastore section and the posture */
  modes: Map<string, FileInfo | null>;
  keyStorage: Posture['key_storage'];
}

export async function dataDirAndKeyFiles(ctx: SectionContext): Promise<KeyFilesFindings> {
  const { cfg, deps } = ctx;
  const dataDir = cfg.dataDir;
  const sqliteFile = cfg.database.kind === 'sqlite' ? cfg.database.file : null;
  const dataDirExists = await checkDataDir(ctx);
  const vault = vaultKeySource(deps.env, dataDir);
  const files = {
    agent: keyringFile(dataDir, 'agent'),
    user: keyringFile(dataDir, 'user'),
    admin: join(dataDir, ADMIN_TOKEN_FILE),
  };
  const modes = new Map<string, FileInfo | null>();
  await checkKeyStorage(ctx, { dataDirExists, vault, files, modes, sqliteFile });
  await exposeWhereKeysSit(ctx, { vault, modes, sqliteFile });
  const adminExpires = await exposeAdminToken(ctx, files.admin, modes);
  const mode = (p: string | null): string | null => {
    if (p === null) return null;
    const i = modes.get(p);
    return i ? octal(i.mode) : null;
  };
  return {
    dataDirExists,
    modes,
    keyStorage: {
      vault: {
        source: vault.source,
        file: vault.file,
        mode: mode(vault.file),
        env_var: vault.source === 'env' ? SECRET_KEY_ENV : null,
        older_keys_file:
          vault.olderKeysFile !== null && modes.get(vault.olderKeysFile)
            ? vault.olderKeysFile
            : null,
      },
      agent_signing: { file: files.agent, mode: mode(files.agent) },
      user_signing: { file: files.user, mode: mode(files.user) },
      admin_token: { file: files.admin, mode: mode(files.admin), expires: adminExpires },
    },
  };
}

/** The data directory: it exists, is a directory, is the owner's alone. */
async function checkDataDir(ctx: SectionContext): Promise<boolean> {
  const { cfg, deps, stat, check } = ctx;
  const dataDir = cfg.dataDir;
  const dirInfo = await stat(dataDir);
  const dataDirExists = dirInfo.info?.kind === 'directory';
  if (dirInfo.error !== undefined) {
    check(
      'data_dir.exists',
      'fail',
      `cannot inspect ${dataDir} (${dirInfo.error}); run doctor as the user that runs leoflow standalone`,
    );
  } else if (dirInfo.info === null) {
    check(
      'data_dir.exists',
      'fail',
      `${dataDir} does not exist: run \`leoflow standalone --data-dir ${sh(dataDir)}\` once to create it, or pass --data-dir (or LEOFLOW_DATA_DIR) naming the directory standalone uses. Doctor never creates it.`,
    );
  } else if (!dataDirExists) {
    check(
      'data_dir.exists',
      'fail',
      `${dataDir} is not a directory: pass --data-dir naming the directory standalone uses`,
    );
  } else {
    check('data_dir.exists', 'ok', `${dataDir} exists`);
    const info = dirInfo.info;
    if ((info.mode & 0o077) !== 0) {
      check(
        'data_dir.mode',
        'fail',
        `${dataDir} is mode ${octal(info.mode)}: other users can reach the keys, the admin token and the database; run \`chmod 700 ${sh(dataDir)}\``,
      );
    } else {
      check('data_dir.mode', 'ok', `${dataDir} is mode ${octal(info.mode)} (owner only)`);
    }
    ownerCheck('data_dir.owner', dataDir, info, deps.uid, check);
  }
  return dataDirExists;
}

interface KeyStorageInputs {
  dataDirExists: boolean;
  vault: VaultKeySource;
  files: { agent: string; user: string; admin: string };
  /** filled in: what each inspected path was */
  modes: Map<string, FileInfo | null>;
  sqliteFile: string | null;
}

/** The keys directory and every key file: each present, regular, mode 0600, ours. */
async function checkKeyStorage(ctx: SectionContext, input: KeyStorageInputs): Promise<void> {
  const { cfg, stat, check } = ctx;
  const { dataDirExists, vault, files, modes, sqliteFile } = input;
  const dataDir = cfg.dataDir;
  const keysDir = join(dataDir, 'keys');
  const fileCheck = keyFileCheck(ctx, modes);
  if (dataDirExists) {
    const keys = await stat(keysDir);
    const k = keys.info;
    if (keys.error !== undefined) {
      check('keys_dir.mode', 'fail', `cannot inspect ${keysDir} (${keys.error})`);
    } else if (k === null) {
      check(
        'keys_dir.mode',
        'warn',
        `${keysDir} does not exist yet: \`leoflow standalone\` creates it (mode 0700) on first start`,
      );
    } else if (k.kind !== 'directory') {
      check(
        'keys_dir.mode',
        'fail',
        `${keysDir} is not a directory: move it aside and let standalone recreate it`,
      );
    } else if ((k.mode & 0o077) !== 0) {
      check(
        'keys_dir.mode',
        'fail',
        `${keysDir} is mode ${octal(k.mode)}: run \`chmod 700 ${sh(keysDir)}\``,
      );
    } else {
      check('keys_dir.mode', 'ok', `${keysDir} is mode ${octal(k.mode)} (owner only)`);
    }
  }
  // A keyring file named by LEOFLOW_SECRET_KEYRING_FILE may live outside the data dir.
  if (vault.file !== null && (dataDirExists || !isInside(vault.file, dataDir))) {
    await fileCheck(
      'key_file.vault_keyring',
      [vault.file],
      vault.source === 'keyring-file',
      'vault keyring',
    );
  }
  if (vault.olderKeysFile !== null && dataDirExists) {
    // Lite keeps loading its generated keyring for older keys after a switch to another source.
    const older = await stat(vault.olderKeysFile);
    modes.set(vault.olderKeysFile, older.info);
    if (older.info !== null) {
      await fileCheck(
        'key_file.vault_older_keys',
        [vault.olderKeysFile],
        false,
        'older vault keys',
      );
    }
  }
  if (dataDirExists) {
    await fileCheck(
      'key_file.agent_signing_keys',
      [files.agent],
      false,
      'agent token signing keys',
    );
    await fileCheck('key_file.user_signing_keys', [files.user], false, 'API token signing keys');
    await fileCheck('key_file.admin_token', [files.admin], false, 'admin token');
    if (sqliteFile !== null) {
      await fileCheck(
        'key_file.database',
        [sqliteFile, `${sqliteFile}-wal`, `${sqliteFile}-shm`],
        false,
        'SQLite database',
      );
    }
  }
  if (cfg.agent.tls !== null) {
    await fileCheck(
      'key_file.agent_tls_key',
      [cfg.agent.tls.keyFile],
      true,
      'agent TLS private key',
    );
  }
  if (vault.problem !== null) check('vault_key.source', 'fail', vault.problem);
  else check('vault_key.source', 'ok', `the vault key comes from ${describeVaultSource(vault)}`);
}

/**
 * One check over a key file (and the files beside it, e.g. SQLite's -wal): present when
 * required, a regular file, mode 0600, owned by the user running doctor.
 */
function keyFileCheck(ctx: SectionContext, modes: Map<string, FileInfo | null>) {
  const { deps, stat, check } = ctx;
  return async (id: string, paths: readonly string[], required: boolean, what: string) => {
    const [main] = paths;
    if (main === undefined) return;
    const found: { path: string; info: FileInfo }[] = [];
    for (const p of paths) {
      const r = await stat(p);
      if (r.error !== undefined) {
        check(
          id,
          'fail',
          `cannot inspect ${p} (${r.error}); run doctor as the user that runs leoflow standalone`,
        );
        return;
      }
      modes.set(p, r.info);
      if (r.info !== null) found.push({ path: p, info: r.info });
    }
    if (!found.some((f) => f.path === main)) {
      check(
        id,
        required ? 'fail' : 'warn',
        required
          ? `${main} (${what}) does not exist: standalone refuses to start without it; fix the path or create it (mode 0600)`
          : `${main} (${what}) does not exist yet: \`leoflow standalone\` creates it (mode 0600) on first start`,
      );
      return;
    }
    for (const f of found) {
      if (f.info.kind !== 'file') {
        check(
          id,
          'fail',
          `${f.path} (${what}) is not a regular file: move it aside and let standalone recreate it`,
        );
        return;
      }
      if ((f.info.mode & 0o077) !== 0) {
        check(
          id,
          'fail',
          `${f.path} (${what}) is mode ${octal(f.info.mode)}, readable or writable by others: run \`chmod 600 ${sh(f.path)}\``,
        );
        return;
      }
      if (deps.uid !== null && f.info.uid !== deps.uid) {
        check(
          id,
          'fail',
          `${f.path} (${what}) is owned by uid ${f.info.uid}, not by the user running doctor (uid ${deps.uid}): run \`chown ${deps.uid} ${sh(f.path)}\` or run doctor as the user that runs standalone`,
        );
        return;
      }
    }
    check(
      id,
      'ok',
      `${found.map((f) => `${f.path} ${octal(f.info.mode)}`).join(', ')} (${what}): owner only`,
    );
  };
}

/** Exposures: the vault key beside the database it protects, or in the environment. */
async function exposeWhereKeysSit(
  ctx: SectionContext,
  input: Pick<KeyStorageInputs, 'vault' | 'modes' | 'sqliteFile'>,
): Promise<void> {
  const { cfg, stat, expose } = ctx;
  const { vault, modes, sqliteFile } = input;
  const dataDir = cfg.dataDir;
  if (sqliteFile !== null) {
    const keyFile = vault.file;
    const keyInfo =
      keyFile === null
        ? null
        : modes.has(keyFile)
          ? modes.get(keyFile)
          : (await stat(keyFile)).info;
    const dbInfo = modes.get(sqliteFile) ?? null;
    if (keyFile !== null && (vault.source === 'lite-keyring-file' || isInside(keyFile, dataDir))) {
      expose(
        'vault_key.beside_database',
        `The vault key (${keyFile}) sits in the same data dir as the SQLite database it protects: whoever copies the data dir — a backup, a disk image — gets both the ciphertexts and the key that opens them.`,
        'Back the keyring up apart from the database, or supply the key from elsewhere: LEOFLOW_SECRET_KEY from a secret manager, or LEOFLOW_SECRET_KEYRING_FILE on another volume.',
      );
    } else if (keyFile !== null && keyInfo && dbInfo && keyInfo.dev === dbInfo.dev) {
      expose(
        'vault_key.beside_database',
        `The vault keyring ${keyFile} is on the same filesystem as the SQLite database: a disk image or snapshot holds both the ciphertexts and the key that opens them.`,
        'Keep the keyring on another volume (or supply LEOFLOW_SECRET_KEY from a secret manager).',
      );
    }
    if (vault.olderKeysFile !== null && modes.get(vault.olderKeysFile)) {
      expose(
        'vault_key.older_keys_beside_database',
        `Lite's generated keyring ${vault.olderKeysFile} is still loaded for older keys and sits beside the database: values sealed under it open with what is on the disk alone.`,
        'Re-encrypt every value under the current key, then move that file off this disk.',
      );
    }
  }
  if (vault.source === 'env') {
    expose(
      'vault_key.in_environment',
      `The vault key is in the control plane's environment (${SECRET_KEY_ENV}): processes of the same user, and root, can read it from /proc/<pid>/environ (agents and tasks start with a minimal environment without it).`,
      `Prefer ${SECRET_KEYRING_FILE_ENV} pointing at a mode 0600 file, and run tasks as another user (--run-as-user).`,
    );
  }
}

/** The admin token's exposure when it has no expiry; returns whether it expires. */
async function exposeAdminToken(
  ctx: SectionContext,
  file: string,
  modes: Map<string, FileInfo | null>,
): Promise<boolean | null> {
  const { deps, expose } = ctx;
  const files = { admin: file };
  const adminInfo = modes.get(files.admin) ?? null;
  const adminExpires = adminInfo !== null ? await tokenHasExpiry(deps, files.admin) : null;
  if (adminExpires !== true) {
    expose(
      'admin_token.no_expiry',
      `The admin token ${adminInfo !== null ? 'in' : 'standalone writes to'} ${files.admin} has no expiry: whoever copies it keeps platform-admin access until it is revoked.`,
      `Keep it mode 0600 and out of shared backups; mint named tokens with a TTL for people and scripts (\`leoflow auth create-token --role admin --ttl 12h\`) and revoke this one with \`leoflow auth revoke-token admin\` (delete ${files.admin} and restart to get a fresh one).`,
    );
  }
  return adminExpires;
}

interface VaultKeySource {
  source: KeyringSource;
  file: string | null;
  olderKeysFile: string | null;
  /** why standalone would refuse to load the key, when it would */
  problem: string | null;
}

/** Mirrors loadKeyring's resolution for Lite without reading any key file. */
function vaultKeySource(env: DoctorDeps['env'], dataDir: string): VaultKeySource {
  const envKey = env[SECRET_KEY_ENV];
  const previous = env[SECRET_KEY_PREVIOUS_ENV];
  const fileSetting = env[SECRET_KEYRING_FILE_ENV];
  const file = fileSetting === undefined || fileSetting === '' ? null : fileSetting;
  const lite = liteKeyringPath(dataDir);
  let problem: string | null = null;
  if (envKey !== undefined && file !== null) {
    problem = `both ${SECRET_KEY_ENV} and ${SECRET_KEYRING_FILE_ENV} are set: standalone refuses to start; unset one (a keyring file already holds the current key and any older ones)`;
  } else if (previous !== undefined && envKey === undefined) {
    problem = `${SECRET_KEY_PREVIOUS_ENV} is set without ${SECRET_KEY_ENV}: standalone refuses to start; set the current key too, or put every key in a keyring file`;
  } else if (envKey !== undefined) {
    // Validated, never shown: the parser's message names the setting and the length only.
    try {
      parseSecretKey(envKey, SECRET_KEY_ENV);
      (previous ?? '')
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== '')
        .forEach((s, i) => parseSecretKey(s, `${SECRET_KEY_PREVIOUS_ENV} (entry ${i + 1})`));
    } catch (err) {
      problem = `${errorText(err)} Standalone refuses to start with it.`;
    }
  }
  if (envKey !== undefined) return { source: 'env', file: null, olderKeysFile: lite, problem };
  if (file !== null) {
    return { source: 'keyring-file', file, olderKeysFile: file === lite ? null : lite, problem };
  }
  return { source: 'lite-keyring-file', file: lite, olderKeysFile: null, problem };
}

function describeVaultSource(v: VaultKeySource): string {
  switch (v.source) {
    case 'env':
      return `the environment (${SECRET_KEY_ENV})`;
    case 'keyring-file':
      return `the keyring file ${v.file ?? ''} (${SECRET_KEYRING_FILE_ENV})`;
    case 'lite-keyring-file':
      return `Lite's generated keyring file ${v.file ?? ''}`;
  }
}

/**
 * Whether the admin token carries an `exp` claim: only the claims segment is decoded, the
 * token itself never leaves this function. null when it cannot be told.
 */
async function tokenHasExpiry(deps: DoctorDeps, file: string): Promise<boolean | null> {
  const text = await deps.readText(file);
  const payload = text?.trim().split('.')[1];
  if (payload === undefined) return null;
  try {
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as unknown;
    if (typeof claims !== 'object' || claims === null) return null;
    return typeof (claims as { exp?: unknown }).exp === 'number';
  } catch {
    return null;
  }
}
