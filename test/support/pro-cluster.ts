import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { CLI, REPO } from './processes.js';

/** A free loopback port (bound then released: fixed ports let a restarted replica keep its own). */
export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const { port } = s.address() as net.AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/**
 * What a Kubernetes Service is to the agents: one address in front of every replica's agent
 * port. Each new connection goes to the next backend that accepts it, so when a replica dies
 * its agents' next connection lands on a live one.
 */
export async function startAgentService(backends: () => number[]): Promise<{
  port: number;
  url: string;
  close(): Promise<void>;
}> {
  let next = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => undefined);
    client.pause();
    const ports = backends();
    const tryFrom = (i: number) => {
      if (i >= ports.length) {
        client.destroy();
        return;
      }
      const port = ports[(next + i) % ports.length]!;
      const upstream = net.connect(port, '127.0.0.1');
      upstream.once('error', () => {
        upstream.destroy();
        tryFrom(i + 1);
      });
      upstream.once('connect', () => {
        next = (next + i + 1) % Math.max(1, ports.length);
        sockets.add(upstream);
        upstream.on('close', () => {
          sockets.delete(upstream);
          client.destroy();
        });
        upstream.removeAllListeners('error');
        upstream.on('error', () => client.destroy());
        client.on('close', () => upstream.destroy());
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
      });
    };
    tryFrom(0);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as net.AddressInfo;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

export type Role = 'all' | 'api' | 'scheduler';

export interface ReplicaSpec {
  name: string;
  role: Role;
  root: string;
  keysDir: string;
  databaseUrl: string;
  agentServiceUrl: string;
  dagsFolder?: string;
  env: Record<string, string>;
  /** lease ttl / renew / margin, e.g. ['3s', '500ms', '1s'] */
  lease: [string, string, string];
}

export interface Replica {
  spec: ReplicaSpec;
  url: string;
  httpPort: number;
  agentPort: number;
  proc: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
  /** SIGTERM: the replica drains and exits */
  stop(): Promise<number | null>;
  kill9(): Promise<void>;
  readyz(): Promise<{ ready: boolean; checks: { name: string; ok: boolean; detail: string }[] }>;
  /** true when this replica holds the scheduler lease now */
  leads(): Promise<boolean>;
}

/** Starts a real `leoflow server` process with fixed ports (kept across restarts). */
export async function startReplica(
  spec: ReplicaSpec,
  ports?: { http: number; agent: number },
): Promise<Replica> {
  const httpPort = ports?.http ?? (await freePort());
  const agentPort = ports?.agent ?? (await freePort());
  const dataDir = join(spec.root, spec.name);
  mkdirSync(dataDir, { recursive: true });
  const args = [
    CLI,
    'server',
    '--role',
    spec.role,
    '--data-dir',
    dataDir,
    '--keys-dir',
    spec.keysDir,
    '--database-url',
    spec.databaseUrl,
    '--http-port',
    String(httpPort),
    '--agent-port',
    String(agentPort),
    '--agent-advertise-url',
    spec.agentServiceUrl,
    '--metrics-port',
    '0',
    '--heartbeat-interval',
    '1s',
    '--agent-lost-threshold',
    '8s',
    '--dispatch-lost-threshold',
    '20s',
    '--standby-agents',
    '0',
    '--lease-ttl',
    spec.lease[0],
    '--lease-renew-interval',
    spec.lease[1],
    '--lease-safety-margin',
    spec.lease[2],
    '--drain-grace',
    '15s',
    ...(spec.dagsFolder ? ['--dags-folder', spec.dagsFolder] : []),
  ];
  const proc = spawn(process.execPath, args, {
    cwd: REPO,
    env: { ...process.env, LEOFLOW_LOG_LEVEL: 'info', ...spec.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  proc.stderr!.on('data', (b: Buffer) => (out += b.toString()));
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  await new Promise<void>((res, rej) => {
    const timer = setTimeout(
      () => rej(new Error(`replica ${spec.name} did not start:\n${out}`)),
      60_000,
    );
    const check = () => {
      if (/Leoflow Pro replica \(role \w+\) is running\./.test(out)) {
        clearTimeout(timer);
        res();
      }
    };
    proc.stdout!.on('data', check);
    void exited.then((code) => {
      clearTimeout(timer);
      rej(new Error(`replica ${spec.name} exited with ${code}:\n${out}`));
    });
  });
  const url = `http://127.0.0.1:${httpPort}`;
  const readyz = async () => {
    const res = await fetch(`${url}/readyz`);
    return (await res.json()) as Awaited<ReturnType<Replica['readyz']>>;
  };
  return {
    spec,
    url,
    httpPort,
    agentPort,
    proc,
    output: () => out,
    exited,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      return exited;
    },
    async kill9() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      await exited;
    },
    readyz,
    async leads() {
      try {
        const r = await readyz();
        return r.checks.some((c) => c.name === 'leader' && c.detail === 'this replica');
      } catch {
        return false;
      }
    },
  };
}

export function adminToken(keysDir: string): string {
  return readFileSync(join(keysDir, 'admin.token'), 'utf8').trim();
}

export function vaultKey(): string {
  return randomBytes(32).toString('base64');
}
