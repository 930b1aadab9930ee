import { dirname, join } from 'node:path';
import type { CheckStatus, DoctorDeps, FileInfo } from './types.js';

/** Small read-only helpers every doctor section shares: stat without throwing, modes, quoting. */

/** stat that reports an inspection error instead of throwing; info null = no such path */
export type SafeStat = (path: string) => Promise<{ info: FileInfo | null; error?: string }>;

export type CheckFn = (id: string, status: CheckStatus, message: string) => void;

export async function readableByOthers(deps: DoctorDeps, file: string): Promise<boolean | null> {
  const st = await safeStat(deps)(file);
  if (st.info === null) return null;
  if ((st.info.mode & 0o004) === 0) return false;
  let dir = dirname(file);
  for (;;) {
    const d = await safeStat(deps)(dir);
    if (d.info === null || (d.info.mode & 0o001) === 0) return false;
    const up = dirname(dir);
    if (up === dir) return true;
    dir = up;
  }
}

export async function findExecutable(deps: DoctorDeps, name: string): Promise<string | null> {
  const dirs = [...(deps.env['PATH'] ?? '').split(':'), '/usr/bin', '/bin'];
  for (const d of dirs) {
    if (!d) continue;
    const p = join(d, name);
    const st = await safeStat(deps)(p);
    if (st.info?.kind === 'file' && (st.info.mode & 0o111) !== 0) return p;
  }
  return null;
}

export function ownerCheck(
  id: string,
  path: string,
  info: FileInfo,
  uid: number | null,
  check: CheckFn,
): void {
  if (uid === null) return;
  if (info.uid !== uid) {
    check(
      id,
      'fail',
      `${path} is owned by uid ${info.uid}, not by the user running doctor (uid ${uid}): run doctor as the user that runs standalone, or \`chown -R ${uid} ${sh(path)}\``,
    );
  } else {
    check(id, 'ok', `${path} is owned by uid ${uid} (the user running doctor)`);
  }
}

export function safeStat(deps: DoctorDeps): SafeStat {
  return async (path) => {
    try {
      return { info: await deps.stat(path) };
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      return { info: null, error: code ?? errorText(err) };
    }
  };
}

export function isInside(file: string, dir: string): boolean {
  const d = dir.endsWith('/') ? dir : `${dir}/`;
  return file.startsWith(d);
}

export function octal(mode: number): string {
  return (mode & 0o7777).toString(8).padStart(4, '0');
}

/** A path as a shell word, quoted only when it needs to be. */
export function sh(path: string): string {
  return /^[\w./@:+,=-]+$/.test(path) ? path : `'${path.replace(/'/g, `'\\''`)}'`;
}

export function errorText(err: unknown): string {
  if (err instanceof Error) return err.message !== '' ? err.message : err.name;
  return String(err);
}
