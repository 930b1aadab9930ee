import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { ConfigError } from '@leoflow/core';

/** The installation's id, in the data dir: it names this installation's work root. */
export const INSTALL_ID_FILE = 'install-id';
/** Where node tasks find `@leoflow/sdk`, under the work root (see installTaskSdk). */
export const TASK_NODE_MODULES = 'node_modules';
export const SDK_ENTRY = 'node_modules/@leoflow/sdk/index.mjs';

/** Reads the install id, creating it (16 hex digits, mode 0600) on first start. */
export function ensureInstallId(dataDir: string): string {
  const file = join(dataDir, INSTALL_ID_FILE);
  const existing = readInstallId(dataDir);
  if (existing !== null) return existing;
  const id = randomBytes(8).toString('hex');
  try {
    writeFileSync(file, `${id}\n`, { mode: 0o600, flag: 'wx' });
    return id;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    const raced = readInstallId(dataDir);
    if (raced !== null) return raced;
    throw new ConfigError(
      'LF_INSTALL_ID',
      `${file} is not a Leoflow install id (16 hex digits); move it aside and restart to mint a new one`,
    );
  }
}

/** The install id, or null when the data dir has none (yet) or it is malformed. */
export function readInstallId(dataDir: string): string | null {
  try {
    const text = readFileSync(join(dataDir, INSTALL_ID_FILE), 'utf8').trim();
    return /^[0-9a-f]{16}$/.test(text) ? text : null;
  } catch {
    return null;
  }
}

/** `/tmp/leoflow-work-<install id>`: two installations on one host never share it. */
export function workRootFor(installId: string, base = tmpdir()): string {
  return join(base, `leoflow-work-${installId}`);
}

/**
 * Creates the work root 0711 (tasks traverse to their own 0700 dirs but cannot list it) and
 * refuses one that is a symlink or owned by anyone else: in a world-writable /tmp another user
 * could have created it first to watch or swap the attempts' directories.
 */
export function ensureWorkRoot(dir: string): void {
  try {
    mkdirSync(dir, { mode: 0o711 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const st = lstatSync(dir);
  const me = process.getuid?.();
  if (!st.isDirectory() || (me !== undefined && st.uid !== me)) {
    throw new ConfigError(
      'LF_WORK_ROOT',
      `${dir} (the work root) is ${st.isSymbolicLink() ? 'a symlink' : st.isDirectory() ? `owned by uid ${st.uid}` : 'not a directory'}, not a directory of uid ${me ?? '?'}: someone else may have created it to reach the attempts' files; remove it and restart`,
    );
  }
  chmodSync(dir, 0o711);
}

/**
 * Places a read-only, self-contained copy of @leoflow/sdk under the work root (dirs 0755,
 * files 0644, owned by this user) and returns the node_modules dir node tasks resolve from. The
 * installation may sit in a 0700 directory (a checkout under /root) that task uids cannot
 * traverse; this copy is reachable wherever Leoflow is installed.
 */
export function installTaskSdk(workRoot: string, bundle: string): string {
  const nodeModules = join(workRoot, TASK_NODE_MODULES);
  const pkgDir = dirname(join(workRoot, SDK_ENTRY));
  for (const d of [nodeModules, dirname(pkgDir), pkgDir]) {
    mkdirSync(d, { recursive: true, mode: 0o755 });
    chmodSync(d, 0o755);
  }
  const put = (name: string, write: (tmp: string) => void) => {
    // Written aside, then renamed: a task starting now sees the old file or the new, never half.
    const tmp = join(pkgDir, `.${name}.${process.pid}.tmp`);
    write(tmp);
    chmodSync(tmp, 0o644);
    renameSync(tmp, join(pkgDir, name));
  };
  put('package.json', (tmp) =>
    writeFileSync(
      tmp,
      `${JSON.stringify({ name: '@leoflow/sdk', version: '0.1.0', type: 'module', exports: { '.': './index.mjs' } }, null, 2)}\n`,
    ),
  );
  put('index.mjs', (tmp) => copyFileSync(bundle, tmp));
  return nodeModules;
}

/** Where python tasks find the `leoflow` package, under the work root (see installTaskPythonSdk). */
export const TASK_PYTHON_PATH = 'python';

/**
 * Places a read-only copy of the Python task SDK (the `leoflow` package's .py files) under the
 * work root (dirs 0755, files 0644) and returns the directory python tasks get on PYTHONPATH,
 * for the same reason as installTaskSdk: the installation may be closed to task uids.
 */
export function installTaskPythonSdk(workRoot: string, packageDir: string): string {
  const base = join(workRoot, TASK_PYTHON_PATH);
  const pkgDir = join(base, 'leoflow');
  for (const d of [base, pkgDir]) {
    mkdirSync(d, { recursive: true, mode: 0o755 });
    chmodSync(d, 0o755);
  }
  for (const name of readdirSync(packageDir)) {
    if (!name.endsWith('.py') && name !== 'py.typed') continue;
    const tmp = join(pkgDir, `.${name}.${process.pid}.tmp`);
    copyFileSync(join(packageDir, name), tmp);
    chmodSync(tmp, 0o644);
    renameSync(tmp, join(pkgDir, name));
  }
  return base;
}
