import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

export const SSHD = process.env.LEOFLOW_SSHD ?? '/usr/sbin/sshd';

/**
 * Whether the ssh runner tests run here. Without sshd a plain `npm test` skips them with a note;
 * under CI (CI=true) or LEOFLOW_TEST_REQUIRE_SSHD=1 a missing sshd is a failure.
 */
export function sshdAvailability(): 'run' | 'skip' | 'missing' {
  if (existsSync(SSHD) && existsSync('/usr/bin/ssh-keygen')) return 'run';
  const required = process.env.CI === 'true' || process.env.LEOFLOW_TEST_REQUIRE_SSHD === '1';
  return required ? 'missing' : 'skip';
}

export const SSHD_HOWTO = `run scripts/dev-services.sh (it installs Debian's openssh-server)`;

export interface KeyPair {
  /** OpenSSH private key file content */
  privateKey: string;
  /** `ssh-ed25519 AAAA… comment` */
  publicKey: string;
}

/**
 * A fresh ed25519 key pair from ssh-keygen, written under `dir` (left for the caller to remove);
 * with a passphrase, the private key is encrypted with it (OpenSSH's bcrypt KDF).
 */
export function generateKeyPair(dir: string, name: string, passphrase = ''): KeyPair {
  const path = join(dir, name);
  const r = spawnSync('/usr/bin/ssh-keygen', [
    '-q',
    '-t',
    'ed25519',
    '-N',
    passphrase,
    '-C',
    name,
    '-f',
    path,
  ]);
  if (r.status !== 0) throw new Error(`ssh-keygen failed: ${r.stderr.toString()}`);
  return {
    privateKey: readFileSync(path, 'utf8'),
    publicKey: readFileSync(`${path}.pub`, 'utf8').trim(),
  };
}

/** The `SHA256:` fingerprint ssh-keygen computes for a public key (the independent reference). */
export function fingerprintOf(dir: string, publicKey: string): string {
  const path = join(dir, `fp-${Math.random().toString(36).slice(2)}.pub`);
  writeFileSync(path, `${publicKey}\n`);
  const r = spawnSync('/usr/bin/ssh-keygen', ['-l', '-E', 'sha256', '-f', path]);
  rmSync(path, { force: true });
  const fp = /SHA256:[A-Za-z0-9+/]+/.exec(r.stdout.toString())?.[0];
  if (!fp) throw new Error(`ssh-keygen -l failed: ${r.stderr.toString()}`);
  return fp;
}

export interface Sshd {
  host: '127.0.0.1';
  port: number;
  /** the only user it lets in: the one running the tests */
  user: string;
  dir: string;
  /** its host key, as `ssh-keyscan` prints it (`[127.0.0.1]:port ssh-ed25519 AAAA…`) */
  knownHostsLine: string;
  hostKeyFingerprint: string;
  /** a client key in authorized_keys */
  client: KeyPair;
  /** everything sshd logged (LogLevel VERBOSE, on stderr) */
  log(): string;
  /** adds a public key to authorized_keys (sshd reads it on every connection) */
  authorize(publicKey: string): void;
  stop(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      s.close(() => resolve(typeof addr === 'object' && addr ? addr.port : 0));
    });
  });
}

/**
 * Debian's sshd on loopback, in the foreground (-D, a child of the test, never a daemon), with
 * its own host key, authorized_keys and config in a fresh temp dir: public keys only, nothing
 * forwarded, one user. sshd cannot listen on port 0 and say which port it got, so it gets one
 * the OS just handed out, and a start that loses that port to someone else is retried.
 */
export async function startSshd(): Promise<Sshd> {
  const dir = mkdtempSync(join(tmpdir(), 'leoflow-sshd-'));
  const user = userInfo().username;
  // Privilege separation, when sshd runs as root, wants its empty directory.
  if (process.getuid?.() === 0 && !existsSync('/run/sshd')) {
    mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
  }
  const host = generateKeyPair(dir, 'host_ed25519');
  const client = generateKeyPair(dir, 'client_ed25519');
  writeFileSync(join(dir, 'authorized_keys'), `${client.publicKey}\n`, { mode: 0o600 });
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    writeFileSync(
      join(dir, 'sshd_config'),
      [
        `ListenAddress 127.0.0.1:${port}`,
        `HostKey ${join(dir, 'host_ed25519')}`,
        `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
        `AllowUsers ${user}`,
        'PidFile none',
        'StrictModes no',
        'UsePAM no',
        'PermitRootLogin prohibit-password',
        'PubkeyAuthentication yes',
        'PasswordAuthentication no',
        'KbdInteractiveAuthentication no',
        'AllowTcpForwarding no',
        'AllowAgentForwarding no',
        'X11Forwarding no',
        'PermitTTY no',
        'LogLevel VERBOSE',
        '',
      ].join('\n'),
    );
    const proc = spawn(SSHD, ['-D', '-e', '-f', join(dir, 'sshd_config')], {
      stdio: ['ignore', 'ignore', 'pipe'],
      detached: true,
    });
    let out = '';
    proc.stderr?.on('data', (b: Buffer) => (out += b.toString()));
    const ok = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 10_000);
      proc.stderr?.on('data', () => {
        if (out.includes('Server listening on')) {
          clearTimeout(timer);
          resolve(true);
        }
      });
      proc.once('exit', () => {
        clearTimeout(timer);
        resolve(false);
      });
    });
    if (!ok) {
      await stopGroup(proc);
      if (/Bind to port|Address already in use/.test(out)) continue;
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`sshd did not start:\n${out}`);
    }
    const [type, blob] = host.publicKey.split(/\s+/);
    return {
      host: '127.0.0.1',
      port,
      user,
      dir,
      knownHostsLine: `[127.0.0.1]:${port} ${type} ${blob}`,
      hostKeyFingerprint: fingerprintOf(dir, host.publicKey),
      client,
      log: () => out,
      authorize: (publicKey) =>
        appendFileSync(join(dir, 'authorized_keys'), `${publicKey.trim()}\n`),
      async stop() {
        await stopGroup(proc);
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  rmSync(dir, { recursive: true, force: true });
  throw new Error('sshd lost its port to another process five times');
}

/** Ends sshd and the per-connection sshd children it forked (its own process group). */
async function stopGroup(proc: ChildProcess): Promise<void> {
  if (proc.pid === undefined || proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  try {
    process.kill(-proc.pid, 'SIGTERM');
  } catch {
    proc.kill('SIGTERM');
  }
  await exited;
}
