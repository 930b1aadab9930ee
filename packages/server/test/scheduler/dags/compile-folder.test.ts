import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isLeoflowError } from '@leoflow/core';
import { MAX_DAG_FILE_BYTES, readDagFile } from '../../../src/scheduler/dags/compile-folder.js';

let base: string;
let root: string;
beforeEach(() => {
  base = realpathSync(mkdtempSync(join(tmpdir(), 'lf-dagfile-')));
  root = join(base, 'dag');
  mkdirSync(root);
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

function refusal(rel: string): { code: string; message: string } {
  try {
    readDagFile(root, rel);
  } catch (e) {
    if (isLeoflowError(e)) return { code: e.code, message: e.message };
    throw e;
  }
  throw new Error(`${rel} was read`);
}

describe('readDagFile', () => {
  it('reads a regular file and a symlink that stays inside the folder', () => {
    writeFileSync(join(root, 'a.sh'), 'echo a\n');
    symlinkSync('a.sh', join(root, 'b.sh'));
    expect(readDagFile(root, 'a.sh')).toBe('echo a\n');
    expect(readDagFile(root, 'b.sh')).toBe('echo a\n');
  });

  it('returns undefined for a missing file and a dangling link', () => {
    symlinkSync(join(base, 'nowhere'), join(root, 'dangling.sh'));
    expect(readDagFile(root, 'missing.sh')).toBeUndefined();
    expect(readDagFile(root, 'dangling.sh')).toBeUndefined();
  });

  it('refuses a link out of the folder, also through a symlinked directory, naming only the relative path', () => {
    writeFileSync(join(base, 'secret'), 'top-secret');
    symlinkSync(join(base, 'secret'), join(root, 'out.sh'));
    symlinkSync(base, join(root, 'up'));
    for (const rel of ['out.sh', 'up/secret']) {
      const r = refusal(rel);
      expect(r.code).toBe('LF_DAG_FILE_OUTSIDE_FOLDER');
      expect(r.message).toContain(`"${rel}"`);
      expect(r.message).not.toContain(base);
      expect(r.message).not.toContain('top-secret');
    }
  });

  it('refuses a file over the limit from its size, and accepts one at the limit', () => {
    writeFileSync(join(root, 'big.sh'), Buffer.alloc(MAX_DAG_FILE_BYTES + 1, 0x61));
    writeFileSync(join(root, 'max.sh'), Buffer.alloc(MAX_DAG_FILE_BYTES, 0x61));
    const r = refusal('big.sh');
    expect(r.code).toBe('LF_DAG_FILE_TOO_LARGE');
    expect(r.message).toContain(String(MAX_DAG_FILE_BYTES));
    expect(readDagFile(root, 'max.sh')).toHaveLength(MAX_DAG_FILE_BYTES);
  });

  it('refuses a FIFO without blocking, and a directory', () => {
    execFileSync('mkfifo', [join(root, 'pipe')]);
    mkdirSync(join(root, 'dir'));
    expect(refusal('pipe').code).toBe('LF_DAG_FILE_NOT_REGULAR');
    expect(refusal('dir').code).toBe('LF_DAG_FILE_NOT_REGULAR');
  });
});
