import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import type { ApiServerHandle, ApiServerKind, Kubelet } from '@leoflow/kube-double';
import { parse, parseAllDocuments } from 'yaml';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { join, resolve } from 'node:path';
import type pg from 'pg';
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
  /**
   * what --agent-advertise-url says: one address in front of every replica (a Service), or
   * every replica's agent URL, comma-separated
   */
  agentServiceUrl: string;
  dagsFolder?: string;
  env: Record<string, string>;
  /** lease ttl / renew / margin, e.g. ['3s', '500ms', '1s'] */
  lease: [string, string, string];
  /** the config file (--config), e.g. the one the deploy manifests ship */
  configFile?: string;
  /** more flags, after the ones above (e.g. a cell's --database-schema, --cell-name) */
  extraArgs?: string[];
  /**
   * execution.writable_paths: the dirs through which a test's tasks exchange files with it (its
   * scratch dir). The sandbox makes the rest of the filesystem read-only and gives each attempt
   * a private /tmp, so a task writing marks anywhere else fails.
   */
  writablePaths?: string[];
  /**
   * another entry taking `leoflow server`'s flags instead of the CLI (a test's replica with an
   * injected clock); it is spawned with an IPC channel
   */
  entry?: string;
  /** the agent-lost threshold (default 8s) */
  agentLostThreshold?: string;
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
    ...(spec.entry ? [spec.entry] : [CLI, 'server']),
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
    spec.agentLostThreshold ?? '8s',
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
    ...(spec.configFile ? ['--config', spec.configFile] : []),
    ...(spec.extraArgs ?? []),
  ];
  const proc = spawn(process.execPath, args, {
    cwd: REPO,
    env: {
      ...process.env,
      LEOFLOW_LOG_LEVEL: 'info',
      ...(spec.writablePaths
        ? { LEOFLOW_EXECUTION_WRITABLE_PATHS: spec.writablePaths.map((p) => resolve(p)).join(',') }
        : {}),
      ...spec.env,
    },
    stdio: spec.entry ? ['ignore', 'pipe', 'pipe', 'ipc'] : ['ignore', 'pipe', 'pipe'],
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

/** Each execution of such a task leaves one file in `marks`: its run, task, try, pid, start and end. */
export function markingTask(marks: string, taskId: string, depends: string[] = []): string {
  return `  - task_id: ${taskId}
    depends_on: [${depends.join(', ')}]
    command: |
      f="${marks}/\${AIRFLOW_CTX_DAG_RUN_ID}__\${AIRFLOW_CTX_TASK_ID}__\${AIRFLOW_CTX_TRY_NUMBER}__$$"
      echo "start $(date +%s%3N)" > "$f"
      sleep 1
      echo "end $(date +%s%3N)" >> "$f"
`;
}

export interface Execution {
  run: string;
  task: string;
  tryNumber: number;
  start: number;
  end: number | null;
}

/** The executions markingTask recorded in `marks`. */
export function executions(marks: string): Execution[] {
  return readdirSync(marks).map((f) => {
    const [run, task, tryNumber] = f.split('__');
    const text = readFileSync(join(marks, f), 'utf8');
    const num = (k: string) => {
      const m = new RegExp(`${k} (\\d+)`).exec(text);
      return m ? Number(m[1]) : null;
    };
    return {
      run: run!,
      task: task!,
      tryNumber: Number(tryNumber),
      start: num('start')!,
      end: num('end'),
    };
  });
}

/** Task instances (run/task) with two executions at the same time (must be none). */
export function overlapping(all: Execution[]): string[] {
  const byInstance = new Map<string, Execution[]>();
  for (const e of all) {
    const k = `${e.run}/${e.task}`;
    byInstance.set(k, [...(byInstance.get(k) ?? []), e]);
  }
  const bad: string[] = [];
  for (const [k, list] of byInstance) {
    const sorted = [...list].sort((a, b) => a.start - b.start);
    for (let i = 1; i < sorted.length; i++) {
      const prev = sorted[i - 1]!;
      if (prev.end === null || prev.end > sorted[i]!.start) bad.push(k);
    }
  }
  return bad;
}

/** POST a run through the first API replica that takes it (a restarting one refuses). */
export async function trigger(
  via: Replica[],
  token: string,
  dag: string,
  runId: string,
): Promise<void> {
  for (let attempt = 0; attempt < 40; attempt++) {
    for (const r of via) {
      try {
        const res = await fetch(`${r.url}/api/v1/dags/${dag}/runs`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ run_id: runId }),
        });
        if (res.status === 201 || res.status === 200) return;
        if (res.status === 409) return; // an earlier attempt of this same trigger landed
        // A draining replica refuses new requests with 503 before routing them: nothing was
        // created, so a client tries the next replica.
        if (res.status === 503) continue;
        throw new Error(`trigger ${dag}/${runId}: ${res.status} ${await res.text()}`);
      } catch (err) {
        if (err instanceof Error && err.message.startsWith('trigger ')) throw err;
      }
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`no API replica accepted trigger ${dag}/${runId}`);
}

export const TERMINAL_RUN_STATES = ['success', 'failed'];

/** run_id → state of a DAG's runs, read from the database. */
export async function runStates(db: pg.Client, dag: string): Promise<Map<string, string>> {
  const { rows } = await db.query<{ run_id: string; state: string }>(
    'select run_id, state from dag_runs where dag_id = $1',
    [dag],
  );
  return new Map(rows.map((r) => [r.run_id, r.state]));
}

/** The run states once `expected` runs of the DAG exist and all have ended; else undefined. */
export async function allFinished(
  db: pg.Client,
  dag: string,
  expected: number,
): Promise<Map<string, string> | undefined> {
  const states = await runStates(db, dag);
  if (states.size < expected) return undefined;
  return [...states.values()].every((s) => TERMINAL_RUN_STATES.includes(s)) ? states : undefined;
}

export async function leaderOf(candidates: Replica[]): Promise<Replica | undefined> {
  for (const r of candidates) if (await r.leads()) return r;
  return undefined;
}

export interface ProKubernetes {
  /** the apiserver: the double or the real kube-apiserver */
  api: ApiServerHandle;
  kubelet: Kubelet;
  /** the namespace the manifests were applied in */
  namespace: string;
  /** the real kubectl against the double (admin unless another kubeconfig is given) */
  kubectl(args: string[], kubeconfig?: string): Promise<string>;
  /** the control plane's kubeconfig: a token of the manifests' leoflow-control-plane service account */
  controlPlaneKubeconfig: string;
  /** the config file the manifests ship (the leoflow-config ConfigMap's config.yaml), parsed */
  shippedConfig: Record<string, unknown>;
  close(): Promise<void>;
}

/**
 * An apiserver — the double, or Kubernetes' own kube-apiserver with its controller manager and
 * scheduler — and a kubelet simulator (the agent image mapped to the built agent) with
 * `manifests` (a Kustomize dir under the repo) applied by the real `kubectl apply -k` in a
 * namespace that enforces Pod Security `restricted`, and a kubeconfig holding a token the
 * apiserver minted for the control plane's service account — so what the control plane may do is
 * what the manifests' Role grants.
 */
export async function startProKubernetes(opts: {
  dir: string;
  manifests: string;
  kind?: ApiServerKind;
}): Promise<ProKubernetes> {
  const { startApiServer } = await import('@leoflow/kube-double');
  const { agentImage } = await import('../../packages/server/test/support/agent-image.js');
  const api = await startApiServer(opts.kind ?? 'double');
  const cacheDir = join(opts.dir, 'kubectl-cache');
  const admin = api.kubeconfig(opts.dir);
  // Asynchronous: the double answers from this same process, so a blocking call would hang.
  const kubectl = async (args: string[], kubeconfig = admin) =>
    (
      await promisify(execFile)(
        '/usr/bin/kubectl',
        ['--kubeconfig', kubeconfig, '--cache-dir', cacheDir, ...args],
        { encoding: 'utf8' },
      )
    ).stdout;
  const rendered = parseAllDocuments(await kubectl(['kustomize', join(REPO, opts.manifests)])).map(
    (d) =>
      d.toJSON() as {
        kind: string;
        metadata: { name: string; namespace?: string };
        data?: Record<string, string>;
      },
  );
  const configMap = rendered.find(
    (o) => o.kind === 'ConfigMap' && o.metadata.name === 'leoflow-config',
  );
  const namespace = configMap?.metadata.namespace;
  if (!configMap?.data?.['config.yaml'] || !namespace)
    throw new Error(`${opts.manifests} renders no leoflow-config ConfigMap with a namespace`);
  await kubectl(['create', 'namespace', namespace]);
  await kubectl(['label', 'namespace', namespace, 'pod-security.kubernetes.io/enforce=restricted']);
  await kubectl(['apply', '-k', join(REPO, opts.manifests)]);
  const token = (
    await kubectl(['-n', namespace, 'create', 'token', 'leoflow-control-plane', '--duration', '2h'])
  ).trim();
  const controlPlaneKubeconfig = api.kubeconfig(opts.dir, {
    token,
    namespace,
    file: 'control-plane.kubeconfig',
  });
  const shippedConfig = parse(configMap.data['config.yaml']) as Record<string, unknown>;
  const image = (shippedConfig as { executor: { kubernetes: { agent_image: string } } }).executor
    .kubernetes.agent_image;
  const kubelet = api.startKubelet({
    nodeName: 'node-a',
    workRoot: join(opts.dir, 'kubelet'),
    imageMap: { [image]: agentImage() },
    allocatable: { cpu: '16', memory: '64Gi' },
    tickIntervalMs: 100,
  });
  await kubelet.ready;
  return {
    api,
    kubelet,
    namespace,
    kubectl,
    controlPlaneKubeconfig,
    shippedConfig,
    async close() {
      await kubelet.stop();
      await api.close();
    },
  };
}
