import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TASK_PYTHON_PATH } from '../../packages/server/src/executor/work-root.js';
import {
  cli,
  REPO,
  scratchDir,
  startStandalone,
  waitFor,
  writeDag,
  type Standalone,
} from '../support/processes.js';

/**
 * Issue 33: every attempt in its own sandbox. Real `leoflow standalone` as root, two tenants,
 * real agents and tasks, in each isolation mode this machine can run (namespaces; the per-uid
 * fallback). A range of two uids and no standby agents force uid reuse: a planting attempt P
 * (tenant A, uid u1) runs beside a concurrent attempt C of tenant B (u2), then the next attempt
 * N (tenant B) gets u1 again.
 *
 * P plants something in every channel — files in every world-writable dir at depth 0 and 3, a
 * setuid copy of python3 in /run/lock (finding 3), System V IPC objects and POSIX shm, an
 * abstract unix socket, keys in @u and @s (finding 4) — and checks its own view: only fds 0-2
 * although the control plane inherited fd 9 (finding 5), no data dir, no /run/leoflow, every
 * mount read-only but its writable places (all nosuid). C, while P runs, looks for P: its
 * processes, environ, signals, ptrace, its abstract socket. N looks for everything P left.
 * Nothing is found.
 *
 * Findings 1 and 2 (root's recursive delete racing a symlink swap) use the helper's swap hook:
 * P leaves /tmp/<tag>-f1/lfswap (mode 0777, 500 files) and a 0777 work dir holding lfswap/;
 * whenever a removal opens a directory named lfswap, the hook renames it away and puts a symlink
 * to a root-only directory of 300 files in its place — what a racing attempt of another tenant
 * did with timing in the issue. Those 300 files must all survive, and the trees must be gone.
 */
const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
const HELPER = join(REPO, 'packages/agent/dist/leoflow-sandbox');
const LOCK_DIR = '/run/leoflow/attempt-uids';

interface ModeRun {
  mode: 'namespaces' | 'fallback';
  range: [number, number];
}

const MODES: ModeRun[] = [
  { mode: 'namespaces', range: [1879113000, 1879113001] },
  { mode: 'fallback', range: [1879113010, 1879113011] },
];

function worldWritable(): string[] {
  const r = spawnSync(HELPER, ['probe', '--world-writable'], { encoding: 'utf8' });
  const found = (JSON.parse(r.stdout) as { world_writable: string[] }).world_writable;
  return [...new Set(['/tmp', '/var/tmp', '/dev/shm', '/run/lock', ...found])];
}

const PLANT = `
set -u
D="$SCR/out"
id -u > "$D/p.uid"
for w in $(echo "$WW" | tr ':' ' '); do
  echo "$TAG" > "$w/lf-$TAG-top" 2>/dev/null && echo "planted top $w"
  if mkdir -p "$w/lf-$TAG-d/a/b" 2>/dev/null; then
    chmod -R 777 "$w/lf-$TAG-d"; echo "$TAG" > "$w/lf-$TAG-d/a/b/deep" && echo "planted deep $w"
  fi
done
cp /usr/bin/python3 "/run/lock/f_$TAG" && chmod 6755 "/run/lock/f_$TAG" && echo "planted setuid"
ipcmk -M 4096 -p 0666 && ipcmk -Q -p 0666 && ipcmk -S 1 -p 0666 && echo "planted sysv ipc"
keyctl add user "lf-$TAG" "$TAG" @u >/dev/null && echo "planted key in @u"
keyctl add user "lfs-$TAG" "$TAG" @s >/dev/null && echo "planted key in @s"
python3 -c "
import os
fds = sorted(int(f) for f in os.listdir('/proc/self/fd'))
print('fds', ' '.join(map(str, fds)))
" 
[ -n "$(ls -A "$DATA" 2>/dev/null)" ] && echo "DATA_DIR_LISTED $(ls -A "$DATA" | tr '\\n' ' ')" || echo "data dir: not visible"
cat "$DATA/admin.token" >/dev/null 2>&1 && echo "ADMIN_TOKEN_READ" || echo "admin token: not readable"
ls -A /run/leoflow/attempt-uids 2>/dev/null | grep -q . && echo "UID_CLAIMS_LISTED" || echo "uid claims: not readable"
cat /proc/self/mountinfo | sed 's/^/MI /'
# finding 1: a tree in /tmp with a subdirectory the swap hook replaces
mkdir -p "/tmp/$TAG-f1/lfswap" && chmod 777 "/tmp/$TAG-f1" "/tmp/$TAG-f1/lfswap"
for i in $(seq 1 500); do : > "/tmp/$TAG-f1/lfswap/f-$i"; done
# finding 2: its own work dir opened to everyone, holding lfswap/
chmod 777 "$HOME" && mkdir "$HOME/lfswap" && chmod 777 "$HOME/lfswap"
for i in $(seq 1 500); do : > "$HOME/lfswap/f-$i"; done
echo "planted swap trees"
python3 -c "
import socket, time, os
s = socket.socket(socket.AF_UNIX); s.bind('\\0lf-' + os.environ['TAG']); s.listen(4)
open(os.environ['SCR'] + '/out/p.ready', 'w').close()
end = time.time() + 60
while time.time() < end and not os.path.exists(os.environ['SCR'] + '/out/c.done'): time.sleep(0.05)
"
echo "plant finished"
`;

const CONCURRENT = `
import ctypes, os, socket, time
D = os.environ['SCR'] + '/out'
TAG = os.environ['TAG']
end = time.time() + 60
while not os.path.exists(D + '/p.ready') and time.time() < end: time.sleep(0.05)
puid = int(open(D + '/p.uid').read())
print('my uid', os.getuid(), 'peer uid', puid)
pids = []
for p in os.listdir('/proc'):
    if not p.isdigit(): continue
    try:
        st = open('/proc/%s/status' % p).read()
    except OSError:
        continue
    uid = [l for l in st.splitlines() if l.startswith('Uid:')][0].split()[1]
    if int(uid) == puid: pids.append(int(p))
print('peer pids visible: %d' % len(pids))
libc = ctypes.CDLL(None, use_errno=True)
for pid in pids:
    try:
        open('/proc/%d/environ' % pid).read(); print('PEER_ENVIRON_READ')
    except OSError:
        print('peer environ: denied')
    try:
        os.kill(pid, 0); print('PEER_SIGNALLED')
    except OSError:
        print('peer signal: denied')
    if libc.ptrace(16, pid, 0, 0) == 0:
        print('PEER_PTRACED'); libc.ptrace(17, pid, 0, 0)
    else:
        print('peer ptrace: denied')
s = socket.socket(socket.AF_UNIX)
try:
    s.connect('\\0lf-' + TAG); print('PEER_ABSTRACT_SOCKET_CONNECTED')
except OSError as e:
    print('abstract socket: refused (%s)' % e.__class__.__name__)
for f in os.listdir('/proc/sysvipc'):
    for line in open('/proc/sysvipc/' + f).read().splitlines()[1:]:
        cols = line.split()
        owner = int(cols[7] if f in ('shm', 'msg') else cols[4])
        if owner == puid: print('PEER_SYSV_IPC_VISIBLE', f)
open(D + '/c.done', 'w').close()
print('concurrent finished')
`;

const NEXT = `
import os, socket, subprocess
D = os.environ['SCR'] + '/out'
TAG = os.environ['TAG']
puid = int(open(D + '/p.uid').read())
print('same uid as the planter' if os.getuid() == puid else 'OTHER UID %d' % os.getuid())
for w in os.environ['WW'].split(':'):
    for p in ('%s/lf-%s-top' % (w, TAG), '%s/lf-%s-d/a/b/deep' % (w, TAG), '%s/%s-f1' % (w, TAG)):
        if os.path.lexists(p): print('FOUND_FILE', p)
if os.path.lexists('/run/lock/f_' + TAG): print('FOUND_SETUID', '/run/lock/f_' + TAG)
for f in os.listdir('/proc/sysvipc'):
    for line in open('/proc/sysvipc/' + f).read().splitlines()[1:]:
        cols = line.split()
        owner = int(cols[7] if f in ('shm', 'msg') else cols[4])
        if owner == puid: print('FOUND_SYSV_IPC', f)
for ring in ('@u', '@s'):
    for name in ('lf-' + TAG, 'lfs-' + TAG):
        r = subprocess.run(['keyctl', 'search', ring, 'user', name], capture_output=True)
        if r.returncode == 0: print('FOUND_KEY', ring, name)
s = socket.socket(socket.AF_UNIX)
try:
    s.connect('\\0lf-' + TAG); print('FOUND_ABSTRACT_SOCKET')
except OSError:
    pass
print('no_new_privs', [l.split()[1] for l in open('/proc/self/status') if l.startswith('NoNewPrivs:')][0])
print('next finished')
`;

function dag(id: string, type: 'bash' | 'python', command: string, env: Record<string, string>) {
  const envYaml = Object.entries(env)
    .map(([k, v]) => `${k}: ${JSON.stringify(v)}`)
    .join(', ');
  return `dag_id: ${id}
tasks:
  - task_id: t
    type: ${type}
    execution_timeout_seconds: 90
    env: { ${envYaml} }
    command: |
${command
  .split('\n')
  .map((l) => `      ${l}`)
  .join('\n')}
`;
}

for (const m of MODES) {
  describe.skipIf(!isRoot || !existsSync(HELPER))(`the attempt sandbox (${m.mode})`, () => {
    let scratch: ReturnType<typeof scratchDir>;
    let sa: Standalone;
    let bToken = '';
    let fd9 = -1;
    const tag = `lfm${randomBytes(4).toString('hex')}`;
    const lines: Record<'p' | 'c' | 'n', string[]> = { p: [], c: [], n: [] };
    let target = '';
    let ww: string[] = [];
    const asA = () => ({ LEOFLOW_URL: sa.url, LEOFLOW_TOKEN: sa.token });
    const asB = () => ({ LEOFLOW_URL: sa.url, LEOFLOW_TOKEN: bToken });

    async function trigger(dagId: string, env: Record<string, string>): Promise<string> {
      const r = await cli(['runs', 'trigger', dagId, '-o', 'json'], env);
      expect(r.code, r.stderr).toBe(0);
      return (JSON.parse(r.stdout) as { run_id: string }).run_id;
    }
    async function finish(dagId: string, runId: string, env: Record<string, string>) {
      const state = await waitFor(
        `${dagId} to finish`,
        async () => {
          const r = await cli(['runs', 'show', runId, '--dag', dagId, '-o', 'json'], env);
          const s = (JSON.parse(r.stdout) as { run: { state: string } }).run.state;
          return s === 'success' || s === 'failed' ? s : undefined;
        },
        90_000,
      );
      const logs = await cli(['tasks', 'logs', runId, 't', '--dag', dagId, '-o', 'json'], env);
      const text = (JSON.parse(logs.stdout) as { lines: { message: string }[] }).lines.map(
        (l) => l.message,
      );
      expect(state, text.join('\n')).toBe('success');
      return text;
    }

    beforeAll(async () => {
      scratch = scratchDir(`leoflow-sec-${m.mode}-`);
      const out = join(scratch.dir, 'out');
      mkdirSync(out);
      chmodSync(out, 0o777);
      // a root-only directory of 300 files: what the swap points the removals at
      target = join(scratch.dir, 'target');
      mkdirSync(target, { mode: 0o700 });
      for (let i = 1; i <= 300; i++) writeFileSync(join(target, `f-${i}`), 'keep');
      ww = worldWritable();
      const dataDir = join(scratch.dir, 'data');
      const env = { SCR: scratch.dir, TAG: tag, WW: ww.join(':'), DATA: dataDir };
      const dagsA = join(scratch.dir, 'dags-a');
      writeDag(dagsA, 'plant', dag('plant', 'bash', PLANT, env));
      // an inherited descriptor of the control plane (finding 5: e.g. fd 251 of its starter)
      fd9 = openSync(join(scratch.dir, 'inherited-canary'), 'w');
      sa = await startStandalone({
        dataDir,
        dagsFolder: dagsA,
        extraArgs: [
          '--attempt-uid-range',
          `${m.range[0]}-${m.range[1]}`,
          '--standby-agents',
          '0',
          '--isolation',
          m.mode === 'namespaces' ? 'auto' : 'fallback',
          '--writable-path',
          scratch.dir,
        ],
        inheritFds: { 9: fd9 },
        env: {
          LEOFLOW_TEST_FAULT_ARM: 'swap-subdir-for-symlink',
          LEOFLOW_TEST_REMOVE_SWAP: `lfswap:${target}`,
        },
      });
      expect(sa.output()).toContain(
        m.mode === 'namespaces' ? 'sandbox      namespaces' : 'sandbox      PER-UID FALLBACK',
      );
      expect((await cli(['tenants', 'create', 'team-b'], asA())).code).toBe(0);
      const tok = await cli(
        ['auth', 'create-token', '--tenant', 'team-b', '--role', 'admin', '--name', 'b'],
        asA(),
      );
      expect(tok.code, tok.stderr).toBe(0);
      bToken = tok.stdout.trim();
      const dagsB = join(scratch.dir, 'dags-b');
      for (const [id, src] of [
        ['concurrent', CONCURRENT],
        ['next', NEXT],
      ] as const) {
        const push = await cli(
          ['dags', 'push', writeDag(dagsB, id, dag(id, 'python', src, env))],
          asB(),
        );
        expect(push.code, push.stderr).toBe(0);
      }

      const p = await trigger('plant', asA());
      // P holds its uid before C asks for one: C then gets the other uid of the range, and N,
      // after both, the planter's again
      await waitFor('the planter to start', async () =>
        existsSync(join(out, 'p.uid')) ? true : undefined,
      );
      const c = await trigger('concurrent', asB());
      lines.p = await finish('plant', p, asA());
      lines.c = await finish('concurrent', c, asB());
      const pUid = Number(readFileSync(join(out, 'p.uid'), 'utf8'));
      // the planter's uid goes back to the range only after its agent reported and swept
      await waitFor('the planter uid to be released', async () =>
        existsSync(join(LOCK_DIR, String(pUid))) ? undefined : true,
      );
      lines.n = await finish('next', await trigger('next', asB()), asB());
    }, 240_000);

    afterAll(async () => {
      await sa?.stop();
      if (fd9 >= 0) closeSync(fd9);
      scratch?.cleanup();
    });

    it('the planter planted in every channel (the test is what it claims)', () => {
      const text = lines.p.join('\n');
      for (const w of ww) expect(text).toContain(`planted top ${w}`);
      for (const what of ['setuid', 'sysv ipc', 'key in @u', 'key in @s', 'swap trees'])
        expect(text).toContain(`planted ${what}`);
      expect(lines.n.join('\n')).toContain('same uid as the planter');
    });

    it('inside: only fds 0-2, no data dir, no /run/leoflow (finding 5)', () => {
      const text = lines.p.join('\n');
      // python's listing holds one fd of its own: 0 1 2 and that one
      expect(lines.p.find((l) => l.startsWith('fds '))).toBe('fds 0 1 2 3');
      expect(text).toContain('admin token: not readable');
      expect(text).not.toContain('ADMIN_TOKEN_READ');
      expect(text).not.toContain('RUN_LEOFLOW_VISIBLE');
      if (m.mode === 'namespaces') expect(text).toContain('data dir: not visible');
    });

    it('a concurrent attempt of another tenant finds nothing of it', () => {
      const text = lines.c.join('\n');
      expect(text).toContain('concurrent finished');
      // The fallback's documented remainder: System V IPC is one namespace for all while they
      // run (the planter opened its objects 0666); its sweep removes them at release.
      const remains = m.mode === 'fallback' ? /^PEER_SYSV_IPC_VISIBLE/ : /^$/;
      expect(
        lines.c.filter((l) => /^PEER_/.test(l) && !remains.test(l)),
        text,
      ).toEqual([]);
      if (m.mode === 'namespaces') expect(text).toContain('peer pids visible: 0');
      else expect(text).toMatch(/peer pids visible: [1-9]/);
      expect(text).toContain('abstract socket: refused');
    });

    const found = (kind: string) => lines.n.filter((l) => l.startsWith(`FOUND_${kind}`));

    it('the next attempt given the same uid (another tenant) finds nothing of it, at any depth of any world-writable dir', () => {
      const text = lines.n.join('\n');
      expect(text).toContain('next finished');
      expect(found('FILE'), text).toEqual([]);
      for (const w of ww) expect(existsSync(join(w, `lf-${tag}-top`)), w).toBe(false);
      expect(
        lines.n.filter((l) => /^FOUND_/.test(l)),
        text,
      ).toEqual([]);
    });

    it('finding 3: no setuid leftover in /run/lock, and a set-id bit would not lift the next attempt (no_new_privs)', () => {
      expect(found('SETUID'), lines.n.join('\n')).toEqual([]);
      expect(existsSync(`/run/lock/f_${tag}`)).toBe(false);
      expect(lines.n).toContain('no_new_privs 1');
    });

    it("finding 4: the uid's keyrings do not reach the next attempt", () => {
      expect(found('KEY'), lines.n.join('\n')).toEqual([]);
    });

    it('finding 5: no System V IPC object or abstract socket of the planter is left', () => {
      expect([...found('SYSV_IPC'), ...found('ABSTRACT')], lines.n.join('\n')).toEqual([]);
    });

    it('no root removal followed the swapped-in link: the root-only files all survive (findings 1, 2)', async () => {
      expect(readdirSync(target)).toHaveLength(300);
      // and the trees are gone: the one in /tmp (fallback: swept as the uid) and the work dir
      expect(existsSync(`/tmp/${tag}-f1`)).toBe(false);
      const workRoot = /work root\s+(\S+)/.exec(sa.output())?.[1] ?? '';
      // what stays in the work root is the installation's read-only SDK copies, not an attempt's
      const shared = new Set(['node_modules', TASK_PYTHON_PATH]);
      await waitFor('the work dirs to be removed', async () =>
        readdirSync(workRoot).filter((n) => !shared.has(n)).length === 0 ? true : undefined,
      );
      expect(readdirSync(target)).toHaveLength(300);
    });

    if (m.mode === 'namespaces') {
      it('every mount is read-only but the private tmpfs, the work dir and the listed paths, all nosuid', () => {
        const mounts = lines.p
          .filter((l) => l.startsWith('MI '))
          .map((l) => {
            const f = l.slice(3).split(' ');
            const dash = f.indexOf('-');
            return { point: f[4]!, opts: f[5]!.split(','), type: f[dash + 1]! };
          });
        expect(mounts.length).toBeGreaterThan(5);
        const writable = mounts.filter((x) => x.opts.includes('rw'));
        for (const w of writable) {
          expect(w.opts, w.point).toContain('nosuid');
          const allowed =
            ww.includes(w.point) ||
            w.point.startsWith(scratch.dir) ||
            w.point.includes('/leoflow-work-') ||
            (w.point === '/proc' && w.type === 'proc') ||
            (w.point === '/dev/pts' && w.type === 'devpts');
          expect(allowed, `${w.point} (${w.type}) is writable`).toBe(true);
          if (ww.includes(w.point)) expect(w.type).toBe('tmpfs');
        }
        // every world-writable dir of the host is a private tmpfs
        for (const w of ww)
          expect(
            writable.some((x) => x.point === w && x.type === 'tmpfs'),
            w,
          ).toBe(true);
        expect(mounts.find((x) => x.point === '/proc/sys')?.opts).toContain('ro');
      });
    }
  });
}
