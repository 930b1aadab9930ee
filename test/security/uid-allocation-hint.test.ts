import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { recordedRanges, UidAllocator } from '../../packages/agent/src/attempt-uid.js';

/**
 * Issue 33, finding 3 (the allocation half): the hint `/run/leoflow/attempt-uids/next` was one
 * file for every installation on the host whatever its range, so another installation's
 * allocations sent this one back to the start of its range and a just-released uid (whose
 * setuid leftover waited in /run/lock) came back at once. Each installation now keeps its own
 * hint; claims stay shared, so installations with overlapping ranges never hold one uid twice,
 * and the ranges are noted for doctor, which warns about the overlap.
 */
const BASE = 1_999_100_000;
const noProcs = { startTime: () => '1', processesOf: () => [] };
let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'leoflow-uidhint-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const allocator = (instance: string, first: number, last: number) =>
  new UidAllocator({
    range: { first, last },
    lockDir: dir,
    instance,
    procs: noProcs,
    ownerPid: process.pid,
    expectedOwner: process.getuid!(),
  });

describe('uid allocation across installations on one host', () => {
  it("another installation's allocations never send this one back to a just-released uid", async () => {
    const lite = allocator('lite-1', BASE, BASE + 9);
    const other = allocator('runner-x', BASE + 100, BASE + 101);
    const first = await lite.allocate();
    expect(first.uid).toBe(BASE);
    first.release();
    for (let i = 0; i < 3; i++) (await other.allocate()).release();
    // the hint of this installation still points past the uid it just released
    expect((await lite.allocate()).uid).toBe(BASE + 1);
  });

  it('overlapping ranges share the claims: one uid is never held by both', async () => {
    const a = allocator('a', BASE + 20, BASE + 21);
    const b = allocator('b', BASE + 21, BASE + 22);
    const held = [await a.allocate(), await a.allocate()].map((l) => l.uid);
    expect(held).toEqual([BASE + 20, BASE + 21]);
    expect((await b.allocate()).uid).toBe(BASE + 22);
    await expect(b.allocate()).rejects.toThrow(/LF_ATTEMPT_UIDS_EXHAUSTED|every uid/);
    expect(recordedRanges(dir)).toEqual({
      a: `${BASE + 20}-${BASE + 21}`,
      b: `${BASE + 21}-${BASE + 22}`,
    });
  });
});
