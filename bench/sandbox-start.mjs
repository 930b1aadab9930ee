// sandbox_start: what the attempt sandbox adds to a task's start (issue 33). The same
// `bash -c true` spawned bare (the baseline), through the helper's namespaced sandbox (own mount,
// IPC, PID, UTS namespaces, a private tmpfs on every world-writable dir, everything else
// read-only, the work dir bound, masks, no_new_privs, a fresh session keyring, Landlock, fds
// closed, a reaper as pid 1) and through the per-uid fallback (the helper without namespaces),
// interleaved one by one so the machine's noise falls on all three alike. Wall ms per spawn and
// CPU ms per spawn (this process's children: the helper, its reaper and the task). Goal: the
// namespaced sandbox adds at most 5 ms wall at p50. Needs root (it runs as an attempt uid).
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO, log, percentile, procCpu, round, summary, timedSpawn } from './lib.mjs';

export const description =
  'bash -c true: bare, in the namespaced sandbox, in the per-uid fallback (interleaved); wall and CPU ms per spawn, and what the sandbox adds';

const HELPER = join(REPO, 'packages/agent/dist/leoflow-sandbox');
const UID = 1879113100;

export async function run({ quick }) {
  if (process.getuid?.() !== 0) return { description, skipped: 'needs root', meets_target: null };
  const n = quick ? 20 : 300;
  const probe = JSON.parse(
    spawnSync(HELPER, ['probe', '--world-writable'], { encoding: 'utf8' }).stdout,
  );
  const tmpfs = [
    ...new Set(['/tmp', '/var/tmp', '/dev/shm', '/run/lock', ...probe.world_writable]),
  ];
  const root = mkdtempSync(join(tmpdir(), 'leoflow-bench-sandbox-'));
  chmodSync(root, 0o711); // as a work root: traversable, not listable
  const work = join(root, 'attempt');
  mkdirSync(work, { mode: 0o700 });
  chownSync(work, UID, UID);
  const status = join(root, 'status');
  const common = [
    '--uid',
    String(UID),
    '--gid',
    String(UID),
    '--nproc',
    '4096',
    '--grace-ms',
    '5000',
    '--chdir',
    work,
  ];
  if (probe.landlock_abi >= 6) common.push('--landlock');
  const variants = {
    bare: ['/bin/bash', ['-c', 'true']],
    namespaces: [
      HELPER,
      [
        'run',
        ...common,
        '--status-file',
        status,
        '--ns',
        ...tmpfs.flatMap((d) => ['--tmpfs', d]),
        '--bind',
        work,
        '--mask',
        '/run/leoflow',
        '--',
        '/bin/bash',
        '-c',
        'true',
      ],
    ],
    fallback: [HELPER, ['run', ...common, '--', '/bin/bash', '-c', 'true']],
  };
  const wall = { bare: [], namespaces: [], fallback: [] };
  const cpu = { bare: 0, namespaces: 0, fallback: 0 };
  log(`sandbox_start: ${n} interleaved spawns of each`);
  for (const [file, args] of Object.values(variants)) await timedSpawn(file, args); // warm-up
  for (let i = 0; i < n; i++) {
    for (const [name, [file, args]] of Object.entries(variants)) {
      const c0 = procCpu(process.pid);
      wall[name].push(await timedSpawn(file, args));
      const c1 = procCpu(process.pid);
      if (c0 && c1) cpu[name] += c1.children_ms - c0.children_ms;
    }
  }
  rmSync(root, { recursive: true, force: true });
  const s = Object.fromEntries(Object.entries(wall).map(([k, xs]) => [k, summary(xs, 2)]));
  const cpuPer = Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, round(v / n, 2)]));
  const pairedAdded = (name) =>
    summary(
      wall[name].map((x, i) => x - wall.bare[i]),
      2,
    );
  const added = {
    namespaces_wall_p50_ms: round(s.namespaces.p50 - s.bare.p50, 2),
    namespaces_paired_ms: pairedAdded('namespaces'),
    namespaces_cpu_ms: round(cpuPer.namespaces - cpuPer.bare, 2),
    fallback_wall_p50_ms: round(s.fallback.p50 - s.bare.p50, 2),
    fallback_paired_ms: pairedAdded('fallback'),
    fallback_cpu_ms: round(cpuPer.fallback - cpuPer.bare, 2),
  };
  const p10 = Object.fromEntries(
    Object.entries(wall).map(([k, xs]) => [k, round(percentile(xs, 10), 2)]),
  );
  return {
    description,
    spawns_each: n,
    // the machine's load: on a shared 2-core machine the wall figures move with it, CPU does not
    load_average_1m: round(loadavg()[0], 2),
    wall_ms_p10: p10,
    added_wall_p10_ms: {
      namespaces: round(p10.namespaces - p10.bare, 2),
      fallback: round(p10.fallback - p10.bare, 2),
    },
    landlock_abi: probe.landlock_abi,
    private_tmpfs: tmpfs,
    wall_ms: s,
    cpu_ms_per_spawn: cpuPer,
    added,
    ratio_namespaces_to_bare_p50: round(s.namespaces.p50 / s.bare.p50, 2),
    target: 'namespaced sandbox adds <= 5 ms wall at p50 over bash -c true',
    meets_target: added.namespaces_wall_p50_ms <= 5,
  };
}
