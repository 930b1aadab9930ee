import {
  closeSync,
  constants,
  existsSync,
  fstatSync,
  lstatSync,
  openSync,
  readdirSync,
  readlinkSync,
  readSync,
  realpathSync,
  statSync,
} from 'node:fs';
import { basename, join, relative, resolve, sep } from 'node:path';
import {
  compileDagYaml,
  DAG_ERROR_CODES,
  LeoflowError,
  type CompileDiagnostic,
  type CompileResult,
} from '@leoflow/core';

export const DAG_FILE = 'leoflow.yaml';

/**
 * Largest DAG file read (leoflow.yaml and each `script:`), checked with stat before any byte is
 * read and again while reading. A compiled DAG travels as one REST body (limit 8 MiB).
 */
export const MAX_DAG_FILE_BYTES = 1024 * 1024;

const OPEN_FLAGS =
  constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;

function isWithin(root: string, p: string): boolean {
  return p === root || p.startsWith(root + sep);
}

function refuse(code: string, message: string): never {
  throw new LeoflowError(code, message);
}

function outside(rel: string): never {
  return refuse(
    DAG_ERROR_CODES.FILE_OUTSIDE_FOLDER,
    `"${rel}" resolves outside the DAG folder (a symlink, or a path through a symlinked folder, to a file elsewhere); it was not read`,
  );
}

function tooLarge(rel: string): never {
  return refuse(
    DAG_ERROR_CODES.FILE_TOO_LARGE,
    `"${rel}" is larger than the ${MAX_DAG_FILE_BYTES} byte (1 MiB) limit of a DAG file; it was not read`,
  );
}

/**
 * Reads `rel` (relative to the DAG folder `root`, itself a realpath) as UTF-8, or undefined when
 * it does not exist. Nothing outside the folder is ever read: the path is resolved with
 * realpath (symlinks and symlinked directories included) and must stay inside `root`; the file
 * is opened with O_NOFOLLOW, and the opened descriptor must be the file that was checked
 * (same device and inode as the lstat of the resolved path, and — where /proc is available —
 * still inside `root`), so a link swapped in after the check is not followed. The size is
 * checked with stat before reading and bounded while reading. Errors name `rel` only.
 */
export function readDagFile(root: string, rel: string): string | undefined {
  let real: string;
  try {
    real = realpathSync(resolve(root, rel));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    if (code === 'ELOOP') outside(rel);
    throw new LeoflowError(
      DAG_ERROR_CODES.FILE_NOT_REGULAR,
      `"${rel}" cannot be read (${code ?? 'error'})`,
    );
  }
  if (!isWithin(root, real)) outside(rel);
  const st = lstatSync(real);
  if (!st.isFile()) {
    refuse(DAG_ERROR_CODES.FILE_NOT_REGULAR, `"${rel}" is not a regular file; it was not read`);
  }
  if (st.size > MAX_DAG_FILE_BYTES) tooLarge(rel);
  let fd: number;
  try {
    fd = openSync(real, OPEN_FLAGS);
  } catch (err) {
    // ELOOP: the final component became a symlink after the check.
    if ((err as NodeJS.ErrnoException).code === 'ELOOP') outside(rel);
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  try {
    const opened = fstatSync(fd);
    if (!opened.isFile() || opened.dev !== st.dev || opened.ino !== st.ino) {
      refuse(
        DAG_ERROR_CODES.FILE_NOT_REGULAR,
        `"${rel}" changed while it was being read; push again once it is stable`,
      );
    }
    const viaProc = openedPath(fd);
    if (viaProc !== null && !isWithin(root, viaProc)) outside(rel);
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const buf = Buffer.allocUnsafe(64 * 1024);
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      total += n;
      if (total > MAX_DAG_FILE_BYTES) tooLarge(rel);
      chunks.push(buf.subarray(0, n));
    }
    return Buffer.concat(chunks, total).toString('utf8');
  } finally {
    closeSync(fd);
  }
}

/** The path the kernel has for an open descriptor (Linux /proc), or null where unavailable. */
function openedPath(fd: number): string | null {
  try {
    return readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    return null;
  }
}

function fileDiagnostic(file: string, err: LeoflowError): CompileDiagnostic {
  return {
    code: err.code,
    severity: 'error',
    message: err.message,
    file,
    line: 1,
    column: 1,
    path: '',
    hint:
      err.code === DAG_ERROR_CODES.FILE_TOO_LARGE
        ? 'a leoflow.yaml holds the DAG, not data; move large content out of it'
        : 'keep leoflow.yaml a regular file inside the DAG folder (not a symlink to one elsewhere)',
  };
}

export interface CompileFolderOptions {
  /**
   * A folder the DAG folder must lie in once symlinks are resolved (the server's dags folder):
   * a symlinked DAG folder pointing elsewhere is refused.
   */
  within?: string;
}

/**
 * Compiles one DAG folder (`<dir>/leoflow.yaml`). Every file it reads — leoflow.yaml and each
 * `script:` — is read by readDagFile: inside the folder only, no symlink out, size-capped.
 * Throws ENOENT when there is no leoflow.yaml.
 */
export function compileDagFolder(
  dir: string,
  opts: CompileFolderOptions = {},
): CompileResult & { file: string } {
  const given = resolve(dir);
  const file = join(given, DAG_FILE);
  const root = realpathSync(given);
  const fail = (err: LeoflowError) => ({
    ok: false as const,
    errors: [fileDiagnostic(file, err)],
    warnings: [],
    file,
  });
  if (opts.within !== undefined && !isWithin(realpathSync(resolve(opts.within)), root)) {
    return fail(
      new LeoflowError(
        DAG_ERROR_CODES.FILE_OUTSIDE_FOLDER,
        `the DAG folder "${relative(resolve(opts.within), given) || '.'}" resolves outside the dags folder (a symlinked folder); it was not read`,
      ),
    );
  }
  let text: string | undefined;
  try {
    text = readDagFile(root, DAG_FILE);
  } catch (err) {
    if (err instanceof LeoflowError) return fail(err);
    throw err;
  }
  if (text === undefined) {
    throw Object.assign(new Error(`no ${DAG_FILE} in the DAG folder`), { code: 'ENOENT' });
  }
  const result = compileDagYaml({
    text,
    fileName: file,
    dirName: basename(given),
    readScript: (rel) => readDagFile(root, rel),
  });
  return { ...result, file };
}

/** Every immediate sub-folder of a dags folder that holds a leoflow.yaml (or the folder itself). */
export function findDagFolders(dagsFolder: string): string[] {
  const root = resolve(dagsFolder);
  if (existsSync(join(root, DAG_FILE))) return [root];
  return readdirSync(root)
    .map((name) => join(root, name))
    .filter((p) => {
      try {
        return statSync(p).isDirectory() && existsSync(join(p, DAG_FILE));
      } catch {
        return false; // a dangling link
      }
    })
    .sort();
}
