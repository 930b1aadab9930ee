import { randomBytes } from 'node:crypto';
import http2 from 'node:http2';
import { existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { create } from '@bufbuild/protobuf';
import type { ServiceImpl } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import { AuthError, type Connection } from '@leoflow/core';
import { AgentService, HeartbeatResponseSchema } from '@leoflow/protocol';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  shellQuote,
  SshRunnerDialer,
  type SshRunner,
  type SshRunnerChannel,
  type SshRunnerLaunch,
} from '../../packages/server/src/runners/ssh-dialer.js';
import {
  generateKeyPair,
  SSHD,
  SSHD_HOWTO,
  sshdAvailability,
  startSshd,
  type KeyPair,
  type Sshd,
} from '../support/sshd.js';
import { readOr } from '../../packages/server/test/executor/host-exposure.js';
import { REPO } from '../support/processes.js';

/**
 * The ssh runner dialer against Debian's real sshd on loopback: the pinned host key (a
 * known_hosts line or a fingerprint) lets the cell in and the remote command's stdio carries
 * bytes both ways; a changed host key and a key the machine does not accept are refused before
 * anything runs; the private key appears in no log line, no error and nothing sshd logged.
 */
const availability = sshdAvailability();
if (availability === 'skip') {
  process.stderr.write(`ssh runner tests skipped: no ${SSHD}; to run them, ${SSHD_HOWTO}\n`);
}

let sshd: Sshd;
let stranger: KeyPair;
let otherHost: KeyPair;
let silent: Server;
let silentPort: number;
const logged: string[] = [];
const logger = pino(
  { level: 'debug' },
  new Writable({
    write(chunk: Buffer, _enc, done) {
      logged.push(chunk.toString('utf8'));
      done();
    },
  }),
);
const PASSPHRASE = `pass-${randomBytes(8).toString('hex')}`;
/** every error the dialer threw here, for the canary check */
const refusals: unknown[] = [];

/** The credential Connections the tests' tenant holds, by id. */
const vault = new Map<string, Connection>();
function sshConnection(privateKey: string | null, passphrase?: string): Connection {
  return {
    conn_type: 'ssh',
    host: null,
    login: null,
    password: null,
    schema: null,
    port: null,
    extra:
      privateKey === null
        ? {}
        : {
            private_key: privateKey,
            ...(passphrase ? { private_key_passphrase: passphrase } : {}),
          },
  };
}

function runner(over: Partial<NonNullable<SshRunner['ssh']>> = {}, port?: number): SshRunner {
  return {
    id: 'rnr_test',
    tenant_id: 'default',
    name: 'gpu-box',
    ssh: {
      host: '127.0.0.1',
      port: port ?? sshd.port,
      user: sshd.user,
      credential: 'box_key',
      host_key: sshd.knownHostsLine,
      ...over,
    },
  };
}

function dialer(launch: SshRunnerLaunch, handshakeTimeoutMs = 10_000): SshRunnerDialer {
  return new SshRunnerDialer({
    connection: async (tenant, id) => (tenant === 'default' ? vault.get(id) : undefined),
    launch,
    logger,
    handshakeTimeoutMs,
    commandTimeoutMs: 10_000,
  });
}

async function refusal(p: Promise<unknown>): Promise<AuthError> {
  const e = await p.then(
    () => new Error('the dial was not refused'),
    (err: unknown) => err,
  );
  refusals.push(e);
  expect(e).toBeInstanceOf(AuthError);
  return e as AuthError;
}

function collect(ch: SshRunnerChannel): Promise<Buffer> {
  const parts: Buffer[] = [];
  ch.stdio.on('data', (b: Buffer) => parts.push(b));
  return ch.exited.then(() => Buffer.concat(parts));
}

const accepted = () => sshd.log().match(/Accepted publickey/g)?.length ?? 0;

beforeAll(async () => {
  if (availability !== 'run') return;
  sshd = await startSshd();
  stranger = generateKeyPair(sshd.dir, 'stranger_ed25519');
  otherHost = generateKeyPair(sshd.dir, 'other_host_ed25519');
  vault.set('box_key', sshConnection(sshd.client.privateKey));
  vault.set('stranger_key', sshConnection(stranger.privateKey));
  const locked = generateKeyPair(sshd.dir, 'locked_ed25519', PASSPHRASE);
  sshd.authorize(locked.publicKey);
  vault.set('locked_key', sshConnection(locked.privateKey, PASSPHRASE));
  vault.set('locked_key_wrong_pass', sshConnection(locked.privateKey, 'not-the-passphrase'));
  vault.set('locked_key_no_pass', sshConnection(locked.privateKey));
  vault.set('no_key', sshConnection(null));
  vault.set('garbled_key', sshConnection('-----BEGIN OPENSSH PRIVATE KEY-----\nnope\n'));
  // Accepts TCP and never speaks SSH: the handshake must give up on its own.
  silent = createServer(() => undefined);
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  const addr = silent.address();
  silentPort = typeof addr === 'object' && addr ? addr.port : 0;
}, 60_000);

afterAll(async () => {
  silent?.close();
  await sshd?.stop();
});

describe.runIf(availability === 'missing')('the ssh runner dialer (sshd missing)', () => {
  it('requires sshd (CI=true or LEOFLOW_TEST_REQUIRE_SSHD=1)', () => {
    throw new Error(`sshd is required but ${SSHD} does not exist; to fix: ${SSHD_HOWTO}`);
  });
});

describe.runIf(availability === 'run').sequential('the ssh runner dialer against sshd', () => {
  it('with the pinned known_hosts line it gets in, and the remote stdio round-trips bytes', async () => {
    const payload = randomBytes(256 * 1024);
    const ch = await dialer({ kind: 'command', command: 'cat' }).dial(runner());
    const echoed = collect(ch);
    ch.stdio.end(payload);
    expect((await echoed).equals(payload)).toBe(true);
    expect(await ch.exited).toEqual({ code: 0, signal: null });
    expect(sshd.log()).toContain(`Accepted publickey for ${sshd.user}`);
  });

  it('with the pinned SHA256 fingerprint it gets in too', async () => {
    const ch = await dialer({ kind: 'command', command: 'echo pinned-by-fingerprint' }).dial(
      runner({ host_key: sshd.hostKeyFingerprint }),
    );
    expect((await collect(ch)).toString()).toBe('pinned-by-fingerprint\n');
  });

  it('a changed host key is refused with LF_SSH_HOST_KEY_MISMATCH before authenticating, and nothing runs', async () => {
    const marker = join(sshd.dir, 'ran-despite-mismatch');
    const before = accepted();
    const touch = dialer({ kind: 'command', command: `touch ${marker}` });
    const [type, blob] = otherHost.publicKey.split(/\s+/);
    for (const host_key of [
      `[127.0.0.1]:${sshd.port} ${type} ${blob}`,
      'SHA256:' + 'A'.repeat(43),
    ]) {
      const e = await refusal(touch.dial(runner({ host_key })));
      expect(e.code).toBe('LF_SSH_HOST_KEY_MISMATCH');
      expect(e.message).toContain(sshd.hostKeyFingerprint);
      expect(e.message).toContain('nothing ran');
    }
    expect(accepted()).toBe(before);
    expect(existsSync(marker)).toBe(false);
    expect(logged.join('')).toContain('"code":"LF_SSH_HOST_KEY_MISMATCH"');
  });

  it('an encrypted key opens with its passphrase, and with a wrong or missing one is refused before dialling', async () => {
    const ch = await dialer({ kind: 'command', command: 'echo unlocked' }).dial(
      runner({ credential: 'locked_key' }),
    );
    expect((await collect(ch)).toString()).toBe('unlocked\n');
    const connections = () => sshd.log().match(/Connection from/g)?.length ?? 0;
    const before = connections();
    for (const credential of ['locked_key_wrong_pass', 'locked_key_no_pass']) {
      const e = await refusal(
        dialer({ kind: 'command', command: 'true' }).dial(runner({ credential })),
      );
      expect(e.code).toBe('LF_SSH_CREDENTIAL_INVALID');
    }
    expect(connections()).toBe(before);
  });

  it('a key the machine does not accept is refused with LF_SSH_AUTH_REFUSED, and nothing runs', async () => {
    const marker = join(sshd.dir, 'ran-as-stranger');
    const e = await refusal(
      dialer({ kind: 'command', command: `touch ${marker}` }).dial(
        runner({ credential: 'stranger_key' }),
      ),
    );
    expect(e.code).toBe('LF_SSH_AUTH_REFUSED');
    expect(existsSync(marker)).toBe(false);
  });

  it('a Connection without a readable private key is refused before any socket opens', async () => {
    const connections = () => sshd.log().match(/Connection from/g)?.length ?? 0;
    const before = connections();
    const d = dialer({ kind: 'command', command: 'true' });
    for (const credential of ['no_key', 'garbled_key', 'deleted_key']) {
      const e = await refusal(d.dial(runner({ credential })));
      expect(e.code).toBe('LF_SSH_CREDENTIAL_INVALID');
      expect(e.message).toContain(credential);
    }
    expect(connections()).toBe(before);
  });

  it('a host that never completes the handshake is refused with LF_SSH_UNREACHABLE within the timeout', async () => {
    const started = Date.now();
    const e = await refusal(
      dialer({ kind: 'command', command: 'true' }, 500).dial(runner({}, silentPort)),
    );
    expect(e.code).toBe('LF_SSH_UNREACHABLE');
    expect(e.message).toContain('no handshake within 500 ms');
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('uploads the runner bundle once per content and runs it with --stdio', async () => {
    const dir = join(sshd.dir, 'remote-home', '.leoflow');
    mkdirSync(join(sshd.dir, 'remote-home'), { recursive: true });
    const bundle = Buffer.from(
      `const args = process.argv.slice(2);\n` +
        `if (args.join('|') !== "--stdio|--work-dir|it's a dir") process.exit(2);\n` +
        `process.stdin.on('data', (b) => process.stdout.write(b.toString().toUpperCase()));\n`,
    );
    const d = dialer({ kind: 'bundle', content: bundle, dir, args: ['--work-dir', "it's a dir"] });
    const first = await d.dial(runner());
    const out = collect(first);
    first.stdio.end('over the channel');
    expect((await out).toString()).toBe('OVER THE CHANNEL');
    const [file] = readdirSync(dir);
    expect(file).toMatch(/^runner-[0-9a-f]{24}\.cjs$/);
    const placed = statSync(join(dir, file ?? ''));
    expect(placed.mode & 0o077).toBe(0);
    const second = await d.dial(runner());
    const again = collect(second);
    second.stdio.end('twice');
    expect((await again).toString()).toBe('TWICE');
    // Not uploaded again: the same file, untouched.
    expect(readdirSync(dir)).toEqual([file]);
    expect(statSync(join(dir, file ?? '')).mtimeMs).toBe(placed.mtimeMs);
  });

  it('the runner protocol (the agent service over HTTP/2) runs over the remote stdio', async () => {
    // The cell: the dialed channel becomes one HTTP/2 connection of a Connect server, as a door
    // session does on the inbound path.
    const seenAuth: string[] = [];
    const h2 = http2.createServer(
      connectNodeAdapter({
        routes: (router) =>
          router.service(AgentService, {
            heartbeat(req, ctx) {
              seenAuth.push(ctx.requestHeader.get('authorization') ?? '');
              return create(HeartbeatResponseSchema, { serverTimeMs: req.sentAtMs + 1n });
            },
          } satisfies Partial<ServiceImpl<typeof AgentService>>),
      }),
    );
    // The machine: a Connect client whose HTTP/2 connection is its own stdin and stdout, as
    // `leoflow-runner --stdio` will be (run from the checkout so its packages resolve).
    const client = [
      "import { Duplex } from 'node:stream';",
      "import { createClient } from '@connectrpc/connect';",
      "import { createGrpcTransport, Http2SessionManager } from '@connectrpc/connect-node';",
      "import { AgentService } from '@leoflow/protocol';",
      'const stdio = Duplex.from({ readable: process.stdin, writable: process.stdout });',
      "const sessionManager = new Http2SessionManager('http://runner-session', undefined, { createConnection: () => stdio });",
      "const agent = createClient(AgentService, createGrpcTransport({ baseUrl: 'http://runner-session', sessionManager }));",
      "const replies = await Promise.all(Array.from({ length: 10 }, (_, i) => agent.heartbeat({ sentAtMs: BigInt(i) }, { headers: { authorization: 'Bearer attempt-token' } })));",
      "process.stderr.write(replies.map((r) => String(r.serverTimeMs)).join(',') + '\\n');",
      'sessionManager.abort();',
      'process.exit(0);',
    ].join('\n');
    const ch = await dialer({
      kind: 'command',
      command: `cd ${REPO} && exec node --input-type=module -e ${shellQuote(client)}`,
    }).dial(runner());
    const stderr: Buffer[] = [];
    ch.stderr.on('data', (b: Buffer) => stderr.push(b));
    h2.emit('connection', ch.stdio);
    expect(await ch.exited).toEqual({ code: 0, signal: null });
    expect(Buffer.concat(stderr).toString().trim()).toBe('1,2,3,4,5,6,7,8,9,10');
    expect(seenAuth).toEqual(Array.from({ length: 10 }, () => 'Bearer attempt-token'));
    h2.close();
  });

  it('the private keys and the passphrase appear in no log line, no error, nothing sshd logged and no process listing', async () => {
    // A live session: every process on the machine (this one, sshd and the remote command) is
    // listed while it runs.
    const live = await dialer({ kind: 'command', command: 'cat' }).dial(runner());
    const listings = readdirSync('/proc')
      .filter((d) => /^\d+$/.test(d))
      .map((pid) => readOr(`/proc/${pid}/cmdline`).replace(/\0/g, ' '));
    live.close();
    await live.exited;
    expect(listings.some((l) => l.includes('sshd'))).toBe(true);
    const keys = [sshd.client.privateKey, stranger.privateKey];
    const bodies = keys.map((k) =>
      k
        .split('\n')
        .filter((l) => l !== '' && !l.startsWith('-----'))
        .join(''),
    );
    const lines = (k: string) => k.split('\n').filter((l) => l.length > 20 && !l.startsWith('---'));
    const haystacks = [
      logged.join(''),
      sshd.log(),
      listings.join('\n'),
      ...refusals.map((e) => (e instanceof Error ? `${e.message} ${JSON.stringify(e)}` : '')),
    ];
    expect(logged.length).toBeGreaterThan(5);
    expect(refusals.length).toBeGreaterThan(5);
    for (const h of haystacks) {
      for (const body of bodies) expect(h).not.toContain(body);
      for (const l of keys.flatMap(lines)) expect(h).not.toContain(l);
      expect(h).not.toContain(PASSPHRASE);
    }
  });
});
