import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';

/**
 * D5: the SDK appends one line per secret it reads (`variable <key>` / `connection <id>`) to a
 * file in the attempt's work dir; the agent sends the names (never values) with its final
 * ReportState and the server audits the undeclared ones. The file is written by task code, so
 * it is read defensively: no symlinks, a regular file only, at most 64 KiB, strict line syntax.
 */
export const SECRET_READS_FILE_NAME = '.leoflow-secret-reads';
const MAX_BYTES = 64 * 1024;
const MAX_NAMES = 500;
const LINE = /^(variable|connection) ([A-Za-z0-9_.-]{1,250})$/;

export function readSecretReads(file: string | undefined): {
  variablesRead: string[];
  connectionsRead: string[];
} {
  const variables = new Set<string>();
  const connections = new Set<string>();
  if (file !== undefined) {
    let fd: number | undefined;
    try {
      fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
      if (fstatSync(fd).isFile()) {
        const buf = Buffer.alloc(MAX_BYTES);
        const n = readSync(fd, buf, 0, MAX_BYTES, 0);
        for (const line of buf.subarray(0, n).toString('utf8').split('\n')) {
          const m = LINE.exec(line.trim());
          if (!m?.[2]) continue;
          const set = m[1] === 'variable' ? variables : connections;
          if (set.size < MAX_NAMES) set.add(m[2]);
        }
      }
    } catch {
      // absent (the task read nothing through the SDK) or unreadable: nothing to report
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
  }
  return { variablesRead: [...variables], connectionsRead: [...connections] };
}
