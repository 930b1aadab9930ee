import { spawn } from 'node:child_process';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isLeoflowError } from '@leoflow/core';
import {
  ConfigError,
  procfs,
  readConfig,
  removeLeftovers,
  UidAllocator,
  type ProcessTable,
  AttemptIsolation,
} from '../src/index.js';

/** Unused ids far above any account on a test machine; each test gets a small slice. */
const BASE = 1_999_000_000;
const DIST = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../dist/attempt-uid.js');

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'leoflow-uidlock-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** A process table where only `alive` pids exist and `busy` uids have processes. */
function fakeProcs(alive: Record<number, string>, busy: Set<number> = new Set()): ProcessTable {
  return {
    startTime: (pid) => alive[pid],
    processesOf: (uid) => (busy.has(uid) ? [4242] : []),
  };
}

describe('UidAllocator', () => {
  it('concurrent agent processes never receive the same uid', async () => {
    const procs = 6;
    const each = 10;
    // Real processes racing on one lock directory, as concurrent agents do.
    const script = `
      const { UidAllocator } = await import(${JSON.stringify(DIST)});
      const a = new UidAllocator({ range: { first: ${BASE}, last: ${BASE + 99} }, lockDir: process.argv[1] });
      const got = await Promise.all(Array.from({ length: ${each} }, () => a.allocate().then((l) => l.uid)));
      process.stdout.write(JSON.stringify(got) + '\\n');
      // Hold the uids (stay alive) until every process has allocated: a dead owner's entries
      // are fair game for reclaim.
      process.stdin.resume();
      process.stdin.on('end', () => process.exit(0));
    `;
    const children: ReturnType<typeof spawn>[] = [];
    const outputs = await Promise.all(
      Array.from(
        { length: procs },
        () =>
          new Promise<number[]>((resolve, reject) => {
            const p = spawn(process.execPath, ['--input-type=module', '-e', script, dir], {
              stdio: ['pipe', 'pipe', 'inherit'],
            });
            children.push(p);
            let out = '';
            p.stdout.on('data', (b: Buffer) => {
              out += b.toString();
              if (out.endsWith('\n')) resolve(JSON.parse(out) as number[]);
            });
            p.once('exit', (code) => reject(new Error(`exit ${code}`)));
          }),
      ),
    );
    for (const c of children) c.stdin?.end();
    const all = outputs.flat();
    expect(all).toHaveLength(procs * each);
    expect(new Set(all).size).toBe(procs * each);
    expect(readdirSync(dir).filter((f) => /^\d+$/.test(f))).toHaveLength(procs * each);
  });

  it('goes round the range: a held uid is never handed out, a released one comes back last', async () => {
    const a = new UidAllocator({ range: { first: BASE, last: BASE + 2 }, lockDir: dir });
    const leases = [await a.allocate(), await a.allocate(), await a.allocate()];
    expect(leases.map((l) => l.uid)).toEqual([BASE, BASE + 1, BASE + 2]);
    expect(leases[0]!.gid).toBe(BASE);
    leases[1]!.release();
    expect((await a.allocate()).uid).toBe(BASE + 1); // the only free one
    leases[0]!.release();
    leases[2]!.release();
    // the search resumes after the last allocation (BASE + 1), not at the start of the range
    expect((await a.allocate()).uid).toBe(BASE + 2);
    expect((await a.allocate()).uid).toBe(BASE);
  });

  it('exhaustion is a clear error naming the key, the range and the way out', async () => {
    const a = new UidAllocator({ range: { first: BASE, last: BASE + 2 }, lockDir: dir });
    for (let i = 0; i < 3; i++) await a.allocate();
    const err = await a.allocate().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isLeoflowError(err) && err.code).toBe('LF_ATTEMPT_UIDS_EXHAUSTED');
    expect((err as Error).message).toContain('execution.attempt_uid_range');
    expect((err as Error).message).toContain(`${BASE}-${BASE + 2}, 3 uids`);
    expect((err as Error).message).toContain('widen the range');
  });

  it('reclaims an entry whose owner is dead and whose uid has no process left', async () => {
    writeFileSync(path.join(dir, String(BASE)), '999999 123\n');
    const a = new UidAllocator({
      range: { first: BASE, last: BASE + 1 },
      lockDir: dir,
      ownerPid: 10,
      procs: fakeProcs({ 10: '77' }),
    });
    expect((await a.allocate()).uid).toBe(BASE);
  });

  it('a reused pid (same pid, another start time) does not keep a dead owner’s entry', async () => {
    writeFileSync(path.join(dir, String(BASE)), '500 111\n');
    const a = new UidAllocator({
      range: { first: BASE, last: BASE + 1 },
      lockDir: dir,
      ownerPid: 10,
      procs: fakeProcs({ 10: '77', 500: '222' }),
    });
    expect((await a.allocate()).uid).toBe(BASE);
  });

  it('never takes an entry whose owner is alive', async () => {
    writeFileSync(path.join(dir, String(BASE)), '500 111\n');
    const a = new UidAllocator({
      range: { first: BASE, last: BASE + 1 },
      lockDir: dir,
      ownerPid: 10,
      procs: fakeProcs({ 10: '77', 500: '111' }),
    });
    expect((await a.allocate()).uid).toBe(BASE + 1);
  });

  it('a dead owner’s uid with processes left is swept first, and kept when they survive', async () => {
    writeFileSync(path.join(dir, String(BASE)), '999999 1\n');
    const busy = new Set([BASE]);
    const swept: number[] = [];
    const stubborn = new UidAllocator({
      range: { first: BASE, last: BASE + 1 },
      lockDir: dir,
      ownerPid: 10,
      procs: fakeProcs({ 10: '77' }, busy),
      sweep: (uid) => {
        swept.push(uid);
        return Promise.resolve(false);
      },
    });
    expect((await stubborn.allocate()).uid).toBe(BASE + 1);
    expect(swept).toEqual([BASE]);
    const killing = new UidAllocator({
      range: { first: BASE, last: BASE + 2 },
      lockDir: dir,
      ownerPid: 10,
      procs: fakeProcs({ 10: '77' }, busy),
      sweep: () => {
        busy.delete(BASE);
        return Promise.resolve(true);
      },
    });
    expect((await killing.allocate()).uid).toBe(BASE);
  });

  it('skips a uid that has processes but no entry (used outside this lock directory)', async () => {
    const a = new UidAllocator({
      range: { first: BASE, last: BASE + 1 },
      lockDir: dir,
      procs: { ...procfs, processesOf: (uid) => (uid === BASE ? [1] : []) },
    });
    expect((await a.allocate()).uid).toBe(BASE + 1);
    expect(readdirSync(dir).filter((f) => /^\d+$/.test(f))).toEqual([String(BASE + 1)]);
  });

  it('removes what a uid left at the top of the shared temp dirs, and nothing of other uids', () => {
    const shared = mkdtempSync(path.join(os.tmpdir(), 'leoflow-shared-'));
    try {
      writeFileSync(path.join(shared, 'left-behind'), 'x');
      mkdirSync(path.join(shared, 'dir'));
      writeFileSync(path.join(shared, 'dir', 'inner'), 'y');
      const me = process.getuid!();
      expect(removeLeftovers(me + 12345, [shared])).toBe(0);
      expect(readdirSync(shared).sort()).toEqual(['dir', 'left-behind']);
      expect(removeLeftovers(me, [shared])).toBe(2);
      expect(readdirSync(shared)).toEqual([]);
    } finally {
      rmSync(shared, { recursive: true, force: true });
    }
  });

  it('refuses a lock directory others can read or write', () => {
    chmodSync(dir, 0o755);
    expect(() => new UidAllocator({ range: { first: BASE, last: BASE }, lockDir: dir })).toThrow(
      /mode 0700/,
    );
  });
});

describe.skipIf(process.getuid?.() !== 0)('procfs.processesOf on the real /proc (root)', () => {
  const started: ReturnType<typeof spawn>[] = [];
  afterEach(() => {
    // the whole group: the shells' own children included
    for (const c of started.splice(0)) process.kill(-c.pid!, 'SIGKILL');
  });
  /** `argv` under setpriv with the given real and effective uid; resolves once it has exec'd */
  async function runAs(ruid: number, euid: number, script: string) {
    const child = spawn(
      'setpriv',
      [`--ruid=${ruid}`, `--euid=${euid}`, '--clear-groups', '/bin/sh', '-c', script],
      { stdio: ['ignore', 'pipe', 'ignore'], detached: true },
    );
    started.push(child);
    await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
    return child.pid!;
  }

  it('finds a process by its real, effective or saved uid, never one of other uids, never a zombie', async () => {
    const [a, b, c] = [BASE + 700, BASE + 710, BASE + 720];
    const plain = await runAs(a, a, 'echo up; exec sleep 30');
    // The shell drops its effective uid c back to the real one, b, and keeps c as the saved
    // uid; the sleep it forks and execs has b only.
    const mixed = await runAs(b, c, 'echo up; sleep 30');
    // The background child exits once its parent has become sleep, which never reaps it: a
    // zombie of uid a + 3.
    const parent = await runAs(a + 3, a + 3, 'echo up; sleep 0.1 & exec sleep 30');
    await new Promise((r) => setTimeout(r, 400));
    expect(procfs.processesOf(a)).toEqual([plain]);
    expect(procfs.processesOf(c)).toEqual([mixed]);
    const ofB = procfs.processesOf(b);
    expect(ofB).toContain(mixed);
    expect(ofB).toHaveLength(2);
    expect(procfs.processesOf(a + 3)).toEqual([parent]);
    // …and the zombie is really there, of that uid
    const [zombie] = readFileSync(`/proc/${parent}/task/${parent}/children`, 'utf8')
      .trim()
      .split(' ');
    const status = readFileSync(`/proc/${zombie}/status`, 'utf8');
    expect(status).toMatch(/^State:\s+Z/m);
    expect(status).toMatch(new RegExp(`^Uid:\\s+${a + 3}\\s`, 'm'));
    expect(procfs.processesOf(a + 4)).toEqual([]);
  });
});

describe('agent config: LEOFLOW_ATTEMPT_UID_RANGE', () => {
  const base = {
    LEOFLOW_AGENT_URL: 'http://127.0.0.1:1',
    LEOFLOW_TASK_INSTANCE_ID: 'ti',
    LEOFLOW_WORKDIR: '/w',
  };
  it('reads the range, the process limit and the lock dir', () => {
    const c = readConfig({
      ...base,
      LEOFLOW_ATTEMPT_UID_RANGE: '1879048192-1879048291',
      LEOFLOW_ATTEMPT_NPROC_LIMIT: '512',
      LEOFLOW_ATTEMPT_UID_LOCK_DIR: '/run/x',
    });
    expect(c.attemptUids).toEqual({
      range: { first: 1879048192, last: 1879048291 },
      nproc: 512,
      lockDir: '/run/x',
    });
    expect(readConfig(base).attemptUids).toBeUndefined();
  });
  it('refuses a malformed range, naming the variable', () => {
    expect(() => readConfig({ ...base, LEOFLOW_ATTEMPT_UID_RANGE: '0-10' })).toThrow(ConfigError);
    expect(() => readConfig({ ...base, LEOFLOW_ATTEMPT_UID_RANGE: '5000-4000' })).toThrow(
      /LEOFLOW_ATTEMPT_UID_RANGE/,
    );
  });
});

describe('AttemptIsolation end-of-attempt sweeps', () => {
  const settings = (lockDir: string) => ({
    range: { first: BASE + 900, last: BASE + 909 },
    nproc: 0,
    lockDir,
  });
  function counting(busy: Set<number>) {
    let scans = 0;
    const procs: ProcessTable = {
      startTime: () => '1',
      processesOf: (uid) => {
        scans++;
        return busy.has(uid) ? [4242] : [];
      },
    };
    return { procs, scans: () => scans };
  }

  it('once the task has ended and a sweep found the uid empty, the release does not scan again', async () => {
    const { procs, scans } = counting(new Set());
    const iso = new AttemptIsolation(settings(dir), procs);
    await iso.acquire();
    iso.taskEnded();
    expect(await iso.killAll()).toEqual({ killed: false, clean: true });
    const before = scans();
    expect(await iso.end()).toBe(true);
    expect(scans()).toBe(before);
  });

  it('without a sweep after the task ended (bootstrap failure), the release scans first', async () => {
    const busy = new Set<number>();
    const { procs, scans } = counting(busy);
    const iso = new AttemptIsolation(settings(dir), procs);
    await iso.acquire();
    await iso.killAll(); // before the task ended: proves nothing about later
    const before = scans();
    expect(await iso.end()).toBe(true);
    expect(scans()).toBeGreaterThan(before);
  });
});
