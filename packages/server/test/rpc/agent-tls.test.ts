import { X509Certificate } from 'node:crypto';
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import http2 from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import type { ConfigError } from '@leoflow/core';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startAgentRpcServer, type AgentRpcServer } from '../../src/rpc/agent-server.js';
import { selfSignedPair } from '../support/self-signed.js';
import type { AgentAuthentication } from '../../src/rpc/agent-auth.js';
import {
  AgentTlsReloader,
  certificateExpiry,
  loadAgentTls,
  type AgentTlsFiles,
  type LoadedAgentTls,
} from '../../src/rpc/agent-tls.js';

const root = mkdtempSync(join(tmpdir(), 'leoflow-agent-tls-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

interface Pair {
  cert: string;
  key: string;
  fingerprint: string;
}

/** A self-signed EC pair for 127.0.0.1, made by the machine's openssl. */
function makePair(name: string, days = 90): Pair {
  const { cert, key } = selfSignedPair(join(root, 'made', name), { name, days });
  const pem = readFileSync(cert, 'utf8');
  return {
    cert: pem,
    key: readFileSync(key, 'utf8'),
    fingerprint: new X509Certificate(pem).fingerprint256,
  };
}

/**
 * A directory laid out as a Kubernetes Secret volume: the files are symlinks into `..data`,
 * itself a symlink to a timestamped directory; an update writes a new one and renames `..data`.
 */
class SecretVolume {
  readonly dir: string;
  #n = 0;
  constructor(name: string, first: { cert: string; key: string }) {
    this.dir = join(root, 'volumes', name);
    mkdirSync(this.dir, { recursive: true });
    this.#write(first);
    symlinkSync('..data/tls.crt', join(this.dir, 'tls.crt'));
    symlinkSync('..data/tls.key', join(this.dir, 'tls.key'));
  }
  get files(): AgentTlsFiles {
    return { certFile: join(this.dir, 'tls.crt'), keyFile: join(this.dir, 'tls.key') };
  }
  swap(next: { cert: string; key: string }): void {
    this.#write(next);
  }
  #write(p: { cert: string; key: string }): void {
    this.#n += 1;
    const stamp = `..2026_12_02_${this.#n}`;
    mkdirSync(join(this.dir, stamp));
    writeFileSync(join(this.dir, stamp, 'tls.crt'), p.cert);
    writeFileSync(join(this.dir, stamp, 'tls.key'), p.key, { mode: 0o600 });
    symlinkSync(stamp, join(this.dir, '..data_tmp'));
    renameSync(join(this.dir, '..data_tmp'), join(this.dir, '..data'));
  }
}

const refuseAll: AgentAuthentication = {
  admit: () => Promise.resolve(undefined),
  interceptor: (next) => next,
};

/** Opens a real HTTP/2 TLS session and resolves with it and the certificate it was served. */
async function connect(
  port: number,
  ca: string[],
): Promise<{ session: http2.ClientHttp2Session; served: string }> {
  const session = http2.connect(`https://127.0.0.1:${port}`, { ca });
  await new Promise<void>((resolve, reject) => {
    session.once('connect', () => resolve());
    session.once('error', reject);
  });
  const peer = (session.socket as TLSSocket).getPeerX509Certificate();
  if (!peer) throw new Error('no peer certificate');
  return { session, served: peer.fingerprint256 };
}

/** One request on a session: the agent port answers (a gRPC refusal) over that connection. */
async function ask(session: http2.ClientHttp2Session): Promise<number> {
  const req = session.request({
    ':method': 'POST',
    ':path': '/leoflow.agent.v1.AgentService/Register',
    'content-type': 'application/grpc',
  });
  req.end();
  const headers = await new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
    req.once('response', resolve);
    req.once('error', reject);
  });
  req.resume();
  return Number(headers[':status']);
}

describe('agent channel TLS: reload of operator certificates', () => {
  let server: AgentRpcServer | undefined;
  let reloader: AgentTlsReloader | undefined;
  const sessions: http2.ClientHttp2Session[] = [];
  afterEach(async () => {
    reloader?.stop();
    for (const s of sessions.splice(0)) s.destroy();
    await server?.close();
    server = undefined;
  });

  async function serve(volume: SecretVolume) {
    const initial = await loadAgentTls(volume.files);
    server = await startAgentRpcServer({
      // The handshake is what is tested: no RPC is ever served.
      impl: {} as Parameters<typeof startAgentRpcServer>[0]['impl'],
      host: '127.0.0.1',
      port: 0,
      tls: initial.tls,
      auth: refuseAll,
    });
    const applied: LoadedAgentTls[] = [];
    const errors: ConfigError[] = [];
    const waiters: (() => void)[] = [];
    const settle = () => waiters.splice(0).forEach((w) => w());
    const live = server;
    reloader = new AgentTlsReloader(
      {
        files: volume.files,
        apply: (tls) => live.setTls!(tls),
        onApplied: (l) => (applied.push(l), settle()),
        onError: (e) => (errors.push(e), settle()),
        debounceMs: 20,
      },
      initial,
    );
    const next = () => new Promise<void>((r) => waiters.push(r));
    return { port: server.port, applied, errors, next };
  }

  it('a Secret update (..data symlink swap) reaches new connections; open ones keep theirs', async () => {
    const a = makePair('pair-a');
    const b = makePair('pair-b');
    const volume = new SecretVolume('swap', a);
    const s = await serve(volume);
    reloader!.start();

    const before = await connect(s.port, [a.cert, b.cert]);
    sessions.push(before.session);
    expect(before.served).toBe(a.fingerprint);

    const event = s.next();
    volume.swap(b); // nothing but a rename in the watched directory
    await event; // the watch fired and the reload finished (no sleep)
    expect(s.errors).toEqual([]);
    expect(s.applied.map((l) => l.subject)).toEqual(['CN=pair-b']);

    const after = await connect(s.port, [a.cert, b.cert]);
    sessions.push(after.session);
    expect(after.served).toBe(b.fingerprint);
    // The connection opened before the swap (an HTTP/2 session never redials by itself)
    // still serves requests after it.
    expect(await ask(before.session)).toBe(200);
    expect(before.session.closed || before.session.destroyed).toBe(false);
  });

  it('a broken new pair is refused with a clear error and the old certificate keeps serving', async () => {
    const a = makePair('pair-c');
    const b = makePair('pair-d');
    const volume = new SecretVolume('broken', a);
    const s = await serve(volume);

    volume.swap({ cert: b.cert, key: a.key }); // a half-updated pair: b's certificate, a's key
    expect(await reloader!.reloadNow()).toBe('refused');
    expect(s.errors.map((e) => e.code)).toEqual(['LF_AGENT_TLS_INVALID']);
    const message = s.errors[0]!.message;
    expect(message).toContain(volume.files.certFile);
    expect(message).toContain('not the certificate’s key');
    expect(message).not.toContain('PRIVATE KEY');
    expect(message).not.toContain(a.key.split('\n')[1]!);

    volume.swap({ cert: 'not a certificate', key: a.key });
    expect(await reloader!.reloadNow()).toBe('refused');
    expect(s.errors[1]?.message).toContain('no PEM certificate');

    const still = await connect(s.port, [a.cert, b.cert]);
    sessions.push(still.session);
    expect(still.served).toBe(a.fingerprint);

    // Once the operator finishes the update, the next reload applies it.
    volume.swap(b);
    expect(await reloader!.reloadNow()).toBe('applied');
    const fixed = await connect(s.port, [a.cert, b.cert]);
    sessions.push(fixed.session);
    expect(fixed.served).toBe(b.fingerprint);
  });

  it('an event that changed nothing is a no-op', async () => {
    const a = makePair('pair-e');
    const volume = new SecretVolume('same', a);
    const s = await serve(volume);
    volume.swap(a); // same bytes, new directory
    expect(await reloader!.reloadNow()).toBe('unchanged');
    expect(s.applied).toEqual([]);
  });
});

describe('certificate expiry', () => {
  it('counts whole days left on an injected clock, negative once expired', () => {
    const pair = makePair('expiry', 10);
    const notAfter = Date.parse(new X509Certificate(pair.cert).validTo);
    expect(certificateExpiry(pair.cert, notAfter - 29.5 * 86_400_000).daysLeft).toBe(29);
    expect(certificateExpiry(pair.cert, notAfter - 1).daysLeft).toBe(0);
    expect(certificateExpiry(pair.cert, notAfter + 86_400_000).daysLeft).toBe(-1);
  });
});
