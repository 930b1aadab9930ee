import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readSecretReads } from '../src/secret-reads.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function scratch(): string {
  const d = mkdtempSync(join(tmpdir(), 'agent-reads-'));
  dirs.push(d);
  return d;
}

describe('the agent reads the task-written secret-reads file defensively', () => {
  it('keeps well-formed names, deduplicated, and drops everything else', () => {
    const f = join(scratch(), 'r');
    writeFileSync(
      f,
      'variable a\nconnection c1\nvariable a\nvariable bad name\nsecret x\nconnection ../etc\n\n',
    );
    expect(readSecretReads(f)).toEqual({ variablesRead: ['a'], connectionsRead: ['c1'] });
  });

  it('refuses a symlink (task code could point it at a root-only file) and a missing file', () => {
    const d = scratch();
    const target = join(d, 'target');
    writeFileSync(target, 'variable leaked\n');
    symlinkSync(target, join(d, 'link'));
    expect(readSecretReads(join(d, 'link'))).toEqual({ variablesRead: [], connectionsRead: [] });
    expect(readSecretReads(join(d, 'missing'))).toEqual({ variablesRead: [], connectionsRead: [] });
    expect(readSecretReads(undefined)).toEqual({ variablesRead: [], connectionsRead: [] });
  });

  it('reads at most 64 KiB and 500 names per kind', () => {
    const f = join(scratch(), 'r');
    const lines = Array.from({ length: 5000 }, (_, i) => `variable v${i}`).join('\n');
    writeFileSync(f, lines);
    const r = readSecretReads(f);
    expect(r.variablesRead.length).toBe(500);
  });
});
