// The real Kubernetes control plane for tests: Kubernetes' own etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler (tools/kube-apiserver, built by scripts/kube-build.sh
// into a cache outside the clone), started on loopback with the flags a cluster has:
//
// - HTTPS with a throwaway CA (made with the openssl CLI), a static admin token (system:masters),
//   client certificates from the same CA for nodes (system:node:<name>, so the kubelet simulator
//   is authorised as a kubelet is: Node authorizer + NodeRestriction);
// - a service-account key pair made with openssl, --service-account-issuer, --api-audiences, the
//   TokenRequest API, --authorization-mode=Node,RBAC,
//   --enable-admission-plugins=PodSecurity,NodeRestriction (beside the default plugins);
// - kube-controller-manager with every controller and per-controller service accounts (namespace
//   deletion, the `default` ServiceAccount, kube-root-ca.crt, garbage collection, node lifecycle);
// - kube-scheduler binding pods to the nodes the kubelet simulator registers.
//
// etcd listens on unix sockets in the cluster's directory; only the apiserver takes a TCP port.
// At most LEOFLOW_REAL_KUBE_SLOTS (default 2) such clusters run at once on a machine (about 500 MB
// each): a start waits for a free slot. close() stops every process and removes the directory; the
// processes are also killed if the test process exits without it.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
  openSync,
  closeSync,
} from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REAL_KUBE_VERSION = 'v1.34.4';
export const REAL_KUBE_ISSUER = 'https://kubernetes.default.svc.cluster.local';
const ADMIN_USERNAME = 'leoflow-test-admin';

export interface RealKubeOptions {
  /** Extra static tokens: token → user (and groups). */
  staticTokens?: Record<string, { username: string; uid?: string; groups?: string[] }>;
  /** Extra kube-apiserver flags (`--name=value`), after the defaults. */
  apiserverFlags?: string[];
  /** Prefix of the scratch directory under the OS temp dir. */
  prefix?: string;
  /** Mirror every component's output to stderr (also LEOFLOW_REAL_KUBE_LOG=1). */
  log?: boolean;
}

export interface ClientCertificate {
  certificate: string;
  key: string;
}

export interface RealKube {
  /** https://127.0.0.1:<port> */
  url: string;
  adminToken: string;
  /** PEM of the CA that signed the serving certificate and the client certificates. */
  caCertificate: string;
  issuer: string;
  apiAudiences: string[];
  /** The scratch directory (certificates, component logs, etcd data); removed by close(). */
  dir: string;
  /** Writes a kubeconfig into `dir` (admin unless a token or client certificate is given). */
  kubeconfig(
    dir: string,
    options?: {
      token?: string;
      clientCertificate?: ClientCertificate;
      namespace?: string;
      file?: string;
    },
  ): string;
  /** A client certificate for `system:node:<nodeName>` in group `system:nodes` (a kubelet's). */
  nodeCertificate(nodeName: string): ClientCertificate;
  /** Compacts etcd's history up to its current revision (what makes an old watch 410). */
  compactEtcd(): Promise<number>;
  /** The last lines a component wrote (kube-apiserver, etcd, kube-controller-manager, kube-scheduler). */
  logTail(component: string, lines?: number): string;
  close(): Promise<void>;
}

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

let binDir: string | undefined;
let checked: boolean | undefined;

/** LEOFLOW_TEST_REQUIRE_KUBE=1 or CI=true: a test on the real apiserver must run, not skip. */
export function realKubeRequired(): boolean {
  return process.env['LEOFLOW_TEST_REQUIRE_KUBE'] === '1' || process.env['CI'] === 'true';
}

/**
 * True when the real control plane is built and up to date (`scripts/kube-build.sh --check`,
 * which never builds) or LEOFLOW_KUBE_BIN names it. Tests ask this before choosing to run on it.
 */
export function realKubeAvailable(): boolean {
  if (checked !== undefined) return checked;
  const fromEnv = process.env['LEOFLOW_KUBE_BIN'];
  if (fromEnv !== undefined && fromEnv !== '') {
    binDir = fromEnv;
    checked = true;
    return checked;
  }
  try {
    binDir = execFileSync(join(REPO, 'scripts/kube-build.sh'), ['--check'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
    checked = true;
  } catch {
    checked = false;
  }
  return checked;
}

let noted = false;
/**
 * Whether tests should run on the real apiserver: when it is built, or when required (then a
 * missing build fails the test instead). Otherwise false, with one note on stderr saying why.
 */
export function realKubeWanted(): boolean {
  if (realKubeAvailable() || realKubeRequired()) return true;
  if (!noted) {
    noted = true;
    process.stderr.write(
      'note: the real kube-apiserver is not built: the tests on it are skipped (run `npm run kube:build`; LEOFLOW_TEST_REQUIRE_KUBE=1 or CI=true makes them required)\n',
    );
  }
  return false;
}

/** The binaries' directory: LEOFLOW_KUBE_BIN, or scripts/kube-build.sh (a no-op when built). */
export function realKubeBinaries(): string {
  if (binDir !== undefined) return binDir;
  const fromEnv = process.env['LEOFLOW_KUBE_BIN'];
  if (fromEnv !== undefined && fromEnv !== '') {
    binDir = fromEnv;
    return binDir;
  }
  try {
    binDir = execFileSync(join(REPO, 'scripts/kube-build.sh'), {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    }).trim();
  } catch (error) {
    throw new Error(
      `the real kube-apiserver is not built and could not be built: run \`npm run kube:build\` and read its message (${(error as Error).message})`,
    );
  }
  return binDir;
}

function openssl(dir: string, ...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', () => done()));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((done) => server.close(() => done()));
  return port;
}

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

// ---- at most N clusters at once on this machine ------------------------------------------------

const SLOT_ROOT = join(tmpdir(), 'leoflow-real-kube-slots');

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function acquireSlot(): Promise<string> {
  const slots = Math.max(1, Number(process.env['LEOFLOW_REAL_KUBE_SLOTS'] ?? '2') || 2);
  mkdirSync(SLOT_ROOT, { recursive: true });
  const deadline = Date.now() + 15 * 60_000;
  for (;;) {
    for (let i = 0; i < slots; i += 1) {
      const slot = join(SLOT_ROOT, `slot-${i}`);
      try {
        mkdirSync(slot);
        writeFileSync(join(slot, 'pid'), String(process.pid));
        return slot;
      } catch {
        // taken: free it if its holder is gone
        let holder = Number.NaN;
        try {
          holder = Number(readFileSync(join(slot, 'pid'), 'utf8'));
        } catch {
          // being written (or removed) right now
        }
        if (Number.isInteger(holder) && !alive(holder))
          rmSync(slot, { recursive: true, force: true });
      }
    }
    if (Date.now() > deadline)
      throw new Error(
        `no free real-kube slot in ${SLOT_ROOT} after 15 minutes: too many test files hold a real apiserver (LEOFLOW_REAL_KUBE_SLOTS=${slots})`,
      );
    await sleep(250);
  }
}

// ---- processes ---------------------------------------------------------------------------------

interface Component {
  name: string;
  child: ChildProcess;
  logFile: string;
  exited: Promise<number | null>;
}

const everyChild = new Set<ChildProcess>();
let exitHookInstalled = false;
function killOnExit(child: ChildProcess): void {
  everyChild.add(child);
  child.once('exit', () => everyChild.delete(child));
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const c of everyChild) {
      try {
        c.kill('SIGKILL');
      } catch {
        // gone
      }
    }
  });
}

function startComponent(
  dir: string,
  name: string,
  binary: string,
  args: string[],
  log: boolean,
): Component {
  const logFile = join(dir, `${name}.log`);
  const fd = openSync(logFile, 'a');
  const child = spawn(binary, args, {
    cwd: dir,
    stdio: ['ignore', log ? 'inherit' : fd, log ? 'inherit' : fd],
  });
  closeSync(fd);
  killOnExit(child);
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  return { name, child, logFile, exited };
}

async function stopComponent(component: Component): Promise<void> {
  const { child } = component;
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await component.exited;
  clearTimeout(timer);
}

function tail(file: string, lines = 30): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

interface Response {
  status: number;
  body: string;
}

function adminGet(url: string, token: string, ca: string, path: string): Promise<Response> {
  return new Promise((done, fail) => {
    const req = httpsRequest(
      `${url}${path}`,
      { ca, headers: { authorization: `Bearer ${token}` }, timeout: 5_000 },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => done({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', fail);
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.end();
  });
}

function etcdPost(socket: string, path: string, body: unknown): Promise<Response> {
  return new Promise((done, fail) => {
    const req = httpRequest(
      { socketPath: socket, path, method: 'POST', headers: { 'content-type': 'application/json' } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => done({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', fail);
    req.end(JSON.stringify(body));
  });
}

function writeKubeconfigFile(
  dir: string,
  file: string,
  server: string,
  ca: string,
  user: Record<string, string>,
  namespace?: string,
): string {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, file);
  const context: Record<string, string> = { cluster: 'real-kube', user: 'user' };
  if (namespace !== undefined) context['namespace'] = namespace;
  const doc = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: 'real-kube',
        cluster: { server, 'certificate-authority-data': Buffer.from(ca).toString('base64') },
      },
    ],
    users: [{ name: 'user', user }],
    contexts: [{ name: 'real-kube', context }],
    'current-context': 'real-kube',
    preferences: {},
  };
  writeFileSync(path, `${JSON.stringify(doc, null, 2)}\n`, { mode: 0o600 });
  return path;
}

export async function startRealKube(options: RealKubeOptions = {}): Promise<RealKube> {
  const bin = realKubeBinaries();
  const log = options.log ?? process.env['LEOFLOW_REAL_KUBE_LOG'] === '1';
  const slot = await acquireSlot();
  const dir = mkdtempSync(join(tmpdir(), options.prefix ?? 'leoflow-real-kube-'));
  const components: Component[] = [];
  const close = async () => {
    for (const component of [...components].reverse()) await stopComponent(component);
    rmSync(dir, { recursive: true, force: true });
    rmSync(slot, { recursive: true, force: true });
  };
  try {
    return await start(bin, dir, options, log, components, close);
  } catch (error) {
    const logs = components
      .map((c) => `--- ${c.name} (${c.child.exitCode ?? 'running'}):\n${tail(c.logFile)}`)
      .join('\n');
    await close();
    throw new Error(`${(error as Error).message}\n${logs}`);
  }
}

async function start(
  bin: string,
  dir: string,
  options: RealKubeOptions,
  log: boolean,
  components: Component[],
  close: () => Promise<void>,
): Promise<RealKube> {
  // Keys and certificates.
  openssl(dir, 'genrsa', '-out', 'sa.key', '2048');
  openssl(dir, 'rsa', '-in', 'sa.key', '-pubout', '-out', 'sa.pub');
  openssl(
    dir,
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    'ca.key',
    '-out',
    'ca.crt',
    '-days',
    '2',
    '-subj',
    '/CN=leoflow-real-kube-ca',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  );
  const issue = (name: string, subject: string, extensions: string) => {
    openssl(
      dir,
      'req',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.csr`,
      '-subj',
      subject,
    );
    writeFileSync(join(dir, `${name}.ext`), extensions);
    openssl(
      dir,
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      `${name}.crt`,
      '-days',
      '2',
      '-extfile',
      `${name}.ext`,
    );
    return {
      certificate: readFileSync(join(dir, `${name}.crt`), 'utf8'),
      key: readFileSync(join(dir, `${name}.key`), 'utf8'),
    };
  };
  issue(
    'serving',
    '/CN=kube-apiserver',
    'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n',
  );
  const caCertificate = readFileSync(join(dir, 'ca.crt'), 'utf8');
  const clientExtensions = 'extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n';

  const token = () => randomBytes(24).toString('base64url');
  const adminToken = token();
  const controllerManagerToken = token();
  const schedulerToken = token();
  const csvField = (value: string) => `"${value.replace(/"/g, '""')}"`;
  const tokenLines = [
    [adminToken, ADMIN_USERNAME, 'leoflow-test-admin', 'system:masters'],
    [controllerManagerToken, 'system:kube-controller-manager', 'kube-controller-manager', ''],
    [schedulerToken, 'system:kube-scheduler', 'kube-scheduler', ''],
    ...Object.entries(options.staticTokens ?? {}).map(([t, user]) => [
      t,
      user.username,
      user.uid ?? user.username,
      (user.groups ?? []).join(','),
    ]),
  ];
  writeFileSync(
    join(dir, 'tokens.csv'),
    tokenLines.map((fields) => fields.map(csvField).join(',')).join('\n') + '\n',
    { mode: 0o600 },
  );

  // etcd on unix sockets in dir (relative to its cwd: etcd's unix URLs take host:port form).
  const etcdSocket = join(dir, 'localhost:2379');
  components.push(
    startComponent(
      dir,
      'etcd',
      join(bin, 'etcd'),
      [
        '--name=leoflow-test',
        `--data-dir=${join(dir, 'etcd-data')}`,
        '--listen-client-urls=unix://localhost:2379',
        '--advertise-client-urls=unix://localhost:2379',
        '--listen-peer-urls=unix://localhost:2380',
        '--initial-advertise-peer-urls=unix://localhost:2380',
        '--initial-cluster=leoflow-test=unix://localhost:2380',
        '--log-level=warn',
        '--quota-backend-bytes=1073741824',
      ],
      log,
    ),
  );

  let url = '';
  for (let attempt = 1; ; attempt += 1) {
    const port = await freePort();
    url = `https://127.0.0.1:${port}`;
    const apiserver = startComponent(
      dir,
      'kube-apiserver',
      join(bin, 'kube-apiserver'),
      [
        `--etcd-servers=unix://${etcdSocket}`,
        '--bind-address=127.0.0.1',
        '--advertise-address=127.0.0.1',
        `--secure-port=${port}`,
        `--cert-dir=${join(dir, 'apiserver-certs')}`,
        `--tls-cert-file=${join(dir, 'serving.crt')}`,
        `--tls-private-key-file=${join(dir, 'serving.key')}`,
        `--client-ca-file=${join(dir, 'ca.crt')}`,
        `--token-auth-file=${join(dir, 'tokens.csv')}`,
        `--service-account-issuer=${REAL_KUBE_ISSUER}`,
        `--service-account-key-file=${join(dir, 'sa.pub')}`,
        `--service-account-signing-key-file=${join(dir, 'sa.key')}`,
        `--api-audiences=${REAL_KUBE_ISSUER}`,
        '--authorization-mode=Node,RBAC',
        '--enable-admission-plugins=PodSecurity,NodeRestriction',
        '--service-cluster-ip-range=10.96.0.0/16',
        // one apiserver on loopback: no endpoints for the `kubernetes` Service (a loopback
        // address is invalid there, and nothing in the tests dials the Service)
        '--endpoint-reconciler-type=none',
        '--profiling=false',
        // nodes are reached (kubectl logs) at their InternalIP: their names resolve nowhere
        '--kubelet-preferred-address-types=InternalIP',
        ...(options.apiserverFlags ?? []),
      ],
      log,
    );
    const apiserverBy = Date.now() + 60_000;
    components.push(apiserver);
    let ready = false;
    while (Date.now() < apiserverBy && apiserver.child.exitCode === null) {
      try {
        const res = await adminGet(url, adminToken, caCertificate, '/readyz');
        if (res.status === 200) {
          ready = true;
          break;
        }
      } catch {
        // not listening yet
      }
      await sleep(100);
    }
    if (ready) break;
    await stopComponent(apiserver);
    components.pop();
    const text = tail(apiserver.logFile, 50);
    if (attempt < 3 && /address already in use/.test(text)) continue;
    throw new Error(`kube-apiserver did not become ready on ${url}`);
  }

  const kubeconfig: RealKube['kubeconfig'] = (target, o = {}) => {
    const user: Record<string, string> =
      o.clientCertificate !== undefined
        ? {
            'client-certificate-data': Buffer.from(o.clientCertificate.certificate).toString(
              'base64',
            ),
            'client-key-data': Buffer.from(o.clientCertificate.key).toString('base64'),
          }
        : { token: o.token ?? adminToken };
    return writeKubeconfigFile(
      target,
      o.file ?? 'kubeconfig',
      url,
      caCertificate,
      user,
      o.namespace,
    );
  };
  const controllerManagerConfig = kubeconfig(dir, {
    token: controllerManagerToken,
    file: 'kube-controller-manager.kubeconfig',
  });
  const schedulerConfig = kubeconfig(dir, {
    token: schedulerToken,
    file: 'kube-scheduler.kubeconfig',
  });
  components.push(
    startComponent(
      dir,
      'kube-controller-manager',
      join(bin, 'kube-controller-manager'),
      [
        `--kubeconfig=${controllerManagerConfig}`,
        '--secure-port=0',
        '--leader-elect=false',
        '--controllers=*',
        '--use-service-account-credentials=true',
        `--service-account-private-key-file=${join(dir, 'sa.key')}`,
        `--root-ca-file=${join(dir, 'ca.crt')}`,
        // a finished pod of a test is not kept around for long
        '--terminated-pod-gc-threshold=100',
      ],
      log,
    ),
  );
  components.push(
    startComponent(
      dir,
      'kube-scheduler',
      join(bin, 'kube-scheduler'),
      [`--kubeconfig=${schedulerConfig}`, '--secure-port=0', '--leader-elect=false'],
      log,
    ),
  );
  // Ready for tests once the controller manager has made the `default` namespace's default
  // ServiceAccount (so it runs with its own service accounts) and the scheduler is up.
  const readyBy = Date.now() + 60_000;
  for (;;) {
    const sa = await adminGet(
      url,
      adminToken,
      caCertificate,
      '/api/v1/namespaces/default/serviceaccounts/default',
    ).catch(() => ({ status: 0, body: '' }));
    const crashed = components.find((c) => c.child.exitCode !== null);
    if (crashed !== undefined) throw new Error(`${crashed.name} exited`);
    if (sa.status === 200) break;
    if (Date.now() > readyBy)
      throw new Error('kube-controller-manager did not create default/default in 60 s');
    await sleep(100);
  }

  const nodeCertificates = new Map<string, ClientCertificate>();
  return {
    url,
    adminToken,
    caCertificate,
    issuer: REAL_KUBE_ISSUER,
    apiAudiences: [REAL_KUBE_ISSUER],
    dir,
    kubeconfig,
    nodeCertificate(nodeName) {
      let cert = nodeCertificates.get(nodeName);
      if (cert === undefined) {
        if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(nodeName))
          throw new Error(`not a node name: ${nodeName}`);
        cert = issue(
          `node-${nodeName}`,
          `/O=system:nodes/CN=system:node:${nodeName}`,
          clientExtensions,
        );
        nodeCertificates.set(nodeName, cert);
      }
      return cert;
    },
    async compactEtcd() {
      const status = await etcdPost(etcdSocket, '/v3/maintenance/status', {});
      const revision = Number(
        (JSON.parse(status.body) as { header?: { revision?: string } }).header?.revision,
      );
      const res = await etcdPost(etcdSocket, '/v3/kv/compaction', { revision, physical: true });
      if (res.status !== 200) throw new Error(`etcd compaction: ${res.status} ${res.body}`);
      return revision;
    },
    logTail(component, lines) {
      return tail(join(dir, `${component}.log`), lines);
    },
    close,
  };
}
