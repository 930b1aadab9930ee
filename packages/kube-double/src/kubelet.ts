// A kubelet simulator: registers a Node and runs every pod the scheduler binds to it as local
// processes (images do not exist here; an image map says what each image runs). It talks to the
// double in process, or to a real kube-apiserver over HTTPS as system:node:<name> (node-backend.ts):
// the same code registers the Node, renews its Lease, watches its pods, reads their Secrets and
// ConfigMaps, requests their projected tokens (TokenRequest bound to the pod) and writes their status.
//
// Per pod it keeps a directory `<workRoot>/<namespace>_<name>_<uid>/` holding `mounts/` (each
// volumeMount's mountPath is `mounts/<mountPath>`; the process gets that root as
// LEOFLOW_KUBELET_VOLUME_ROOT), `logs/<container>.log` and `work/` (the cwd unless workingDir is
// set). Projected service-account tokens are requested through TokenRequest bound to the pod and
// rewritten at 80% of their lifetime. Status goes Pending → Running → Succeeded/Failed with the
// container's exit code and reason; deletion sends SIGTERM, waits the grace period, sends SIGKILL,
// then removes the pod; activeDeadlineSeconds fails the pod with DeadlineExceeded.
//
// Time-driven work (token refresh, deadlines, grace expiry, pull back-off, memory limits) happens in
// tick(), which a timer calls; tests with a ManualClock call (and await) it themselves.
import { spawn, type ChildProcess } from 'node:child_process';
import {
  createWriteStream,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  writeFileSync,
  type WriteStream,
} from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { rfc3339, type Clock } from './clock.js';
import {
  ContainerConfigError,
  containerEnvironment,
  expandReferences,
  type ObjectLookup,
} from './container-env.js';
import type { KubeDouble } from './double.js';
import {
  debug,
  doubleNodeBackend,
  httpNodeBackend,
  NodeApiError,
  type NodeBackend,
  type PodEventType,
} from './node-backend.js';
import type {
  ConfigMap,
  Container,
  ContainerState,
  ContainerStatus,
  KeyToPath,
  KubeObject,
  Node,
  Pod,
  PodCondition,
  Secret,
} from './objects.js';
import { bytes } from './quantity.js';
import type { RealKube } from './real-apiserver.js';

/** What an image runs, in local terms. */
export interface ImageSpec {
  /** The image's ENTRYPOINT as a local command (used when the container sets no command). */
  entrypoint?: string[];
  /** The image's CMD (the arguments when the container sets neither command nor args). */
  cmd?: string[];
  /** Executables inside the image, by path or base name, as local commands. */
  binaries?: Record<string, string[]>;
  /** Extra environment the image carries (its ENV lines). */
  env?: Record<string, string>;
}

export interface KubeletOptions {
  /** The double (in process) … */
  double?: KubeDouble;
  /** … or a real control plane from startRealKube (over HTTPS, as system:node:<nodeName>) … */
  real?: RealKube;
  /** … or any other backend. */
  backend?: NodeBackend;
  nodeName: string;
  imageMap: Record<string, ImageSpec>;
  workRoot: string;
  labels?: Record<string, string>;
  allocatable?: { cpu?: string; memory?: string; pods?: string };
  /** Artificial image-pull time, so a test can hold a pod Pending. */
  imagePullDelayMs?: number;
  /** Or an explicit gate: the pull finishes when the promise settles. */
  pullGate?: (pod: Pod, image: string) => Promise<void>;
  clock?: Clock;
  tickIntervalMs?: number;
  /** Extra environment every container gets (e.g. PATH for the test's tools). */
  baseEnv?: Record<string, string>;
}

export const VOLUME_ROOT_ENV = 'LEOFLOW_KUBELET_VOLUME_ROOT';

/** The kubelet refreshes a projected token once 80% of its lifetime has passed. */
const TOKEN_REFRESH_FRACTION = 0.8;

interface RunningContainer {
  spec: Container;
  process?: ChildProcess;
  state: ContainerState;
  restartCount: number;
  startedAt?: number;
  oomKilled?: boolean;
  log?: WriteStream;
}

interface ProjectedToken {
  file: string[];
  audience?: string;
  expirationSeconds: number;
  refreshAt: number;
}

interface PodRun {
  key: string;
  /** status writes of this pod, in order */
  writes: Promise<void>;
  uid: string;
  namespace: string;
  name: string;
  dir: string;
  phase: 'pulling' | 'pull-failed' | 'config-error' | 'running' | 'terminating' | 'finished';
  containers: RunningContainer[];
  tokens: ProjectedToken[];
  /** the Secrets and ConfigMaps read at the last launch (for container restarts) */
  objects?: ObjectLookup;
  startTime: number;
  pullFailedAt?: number;
  deadlineExceeded?: boolean;
  killAt?: number;
  pullDone: boolean;
}

function podKey(pod: KubeObject): string {
  return `${pod.metadata.namespace ?? ''}/${pod.metadata.name ?? ''}`;
}

export class Kubelet {
  private readonly runs = new Map<string, PodRun>();
  /** The pods bound to this node as the last watch event showed them. */
  private readonly pods = new Map<string, Pod>();
  private readonly clock: Clock;
  private readonly backend: NodeBackend;
  private unsubscribe: () => void = () => undefined;
  private readonly timer: NodeJS.Timeout;
  private readonly heartbeatTimer: NodeJS.Timeout;
  private ticking: Promise<void> | undefined;
  private stopped = false;
  /** Resolves once the Node is registered and its pods are watched. */
  readonly ready: Promise<void>;

  constructor(private readonly options: KubeletOptions) {
    const backend =
      options.backend ??
      (options.double !== undefined
        ? doubleNodeBackend(options.double, options.clock)
        : options.real !== undefined
          ? httpNodeBackend({
              url: options.real.url,
              caCertificate: options.real.caCertificate,
              clientCertificate: options.real.nodeCertificate(options.nodeName),
              clock: options.clock,
            })
          : undefined);
    if (backend === undefined) throw new Error('startKubelet needs double, real or backend');
    this.backend = backend;
    this.clock = options.clock ?? backend.clock;
    this.ready = this.register();
    this.ready.catch((error: Error) => debug(`registration: ${error.message}`));
    this.timer = setInterval(() => void this.tick(), options.tickIntervalMs ?? 200);
    this.timer.unref();
    // A real node controller marks a node whose Lease is not renewed within 40 s NotReady.
    this.heartbeatTimer = setInterval(() => {
      this.backend
        .heartbeat(this.options.nodeName)
        .catch((error: Error) => debug(`heartbeat: ${error.message}`));
    }, 10_000);
    this.heartbeatTimer.unref();
  }

  private async register(): Promise<void> {
    // On the double every step below runs synchronously, before the constructor returns.
    const logsPromise = this.backend.serveLogs(
      this.options.nodeName,
      (namespace, name, container) => this.readLog(namespace, name, container),
    );
    const registered = this.registerNode(logsPromise);
    this.unsubscribe = this.backend.watchPods(this.options.nodeName, (type, pod) =>
      this.onEvent(type, pod),
    );
    await registered;
    await this.backend.heartbeat(this.options.nodeName);
  }

  get nodeName(): string {
    return this.options.nodeName;
  }

  /** The directory of a pod's mounts (what LEOFLOW_KUBELET_VOLUME_ROOT points at). */
  volumeRoot(namespace: string, name: string): string | undefined {
    const run = this.runs.get(`${namespace}/${name}`);
    return run === undefined ? undefined : join(run.dir, 'mounts');
  }

  private nodeObject(logPort: number | undefined): Node {
    const allocatable = {
      cpu: this.options.allocatable?.cpu ?? '4',
      memory: this.options.allocatable?.memory ?? '8Gi',
      pods: this.options.allocatable?.pods ?? '110',
    };
    const now = rfc3339(this.clock.now());
    return {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: {
        name: this.options.nodeName,
        labels: {
          'kubernetes.io/hostname': this.options.nodeName,
          'kubernetes.io/os': 'linux',
          'kubernetes.io/arch': 'amd64',
          ...(this.options.labels ?? {}),
        },
      },
      spec: {},
      status: {
        capacity: allocatable,
        allocatable,
        conditions: [
          {
            type: 'Ready',
            status: 'True',
            reason: 'KubeletReady',
            message: 'kubelet simulator is posting ready status',
            lastHeartbeatTime: now,
            lastTransitionTime: now,
          },
        ],
        addresses: [
          { type: 'InternalIP', address: '127.0.0.1' },
          { type: 'Hostname', address: this.options.nodeName },
        ],
        ...(logPort !== undefined
          ? { daemonEndpoints: { kubeletEndpoint: { Port: logPort } } }
          : {}),
      },
    };
  }

  private registerNode(logPort: Promise<number | undefined>): Promise<void> {
    // The double answers serveLogs synchronously with undefined; keep registration synchronous there.
    if (this.options.double !== undefined && this.options.backend === undefined)
      return this.backend.registerNode(this.nodeObject(undefined));
    return logPort.then((port) => this.backend.registerNode(this.nodeObject(port)));
  }

  private onEvent(type: PodEventType, pod: Pod): void {
    const key = podKey(pod);
    if (type === 'DELETED') {
      if (this.pods.get(key)?.metadata.uid === pod.metadata.uid) this.pods.delete(key);
      const run = this.runs.get(key);
      if (run !== undefined && run.uid === pod.metadata.uid) this.forget(run, 'SIGKILL');
      return;
    }
    if (pod.spec.nodeName !== this.options.nodeName) return;
    this.pods.set(key, pod);
    this.consider(pod);
  }

  private consider(pod: Pod): void {
    if (this.stopped || pod.spec.nodeName !== this.options.nodeName) return;
    const run = this.runs.get(podKey(pod));
    if (run === undefined || run.uid !== pod.metadata.uid) {
      if (run !== undefined) this.forget(run, 'SIGKILL');
      if (pod.metadata.deletionTimestamp !== undefined) {
        void this.removePod(
          pod.metadata.namespace ?? '',
          pod.metadata.name ?? '',
          pod.metadata.uid ?? '',
        );
        return;
      }
      if (pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') return;
      void this.start(pod);
      return;
    }
    if (pod.metadata.deletionTimestamp !== undefined && run.phase !== 'terminating')
      this.terminate(run, pod);
  }

  private async start(pod: Pod): Promise<void> {
    const namespace = pod.metadata.namespace ?? '';
    const name = pod.metadata.name ?? '';
    const uid = pod.metadata.uid ?? '';
    const dir = join(this.options.workRoot, `${namespace}_${name}_${uid}`);
    mkdirSync(join(dir, 'mounts'), { recursive: true });
    mkdirSync(join(dir, 'logs'), { recursive: true });
    mkdirSync(join(dir, 'work'), { recursive: true });
    const run: PodRun = {
      key: `${namespace}/${name}`,
      writes: Promise.resolve(),
      uid,
      namespace,
      name,
      dir,
      phase: 'pulling',
      containers: pod.spec.containers.map((spec) => ({
        spec,
        restartCount: 0,
        state: { waiting: { reason: 'ContainerCreating' } },
      })),
      tokens: [],
      startTime: this.clock.now(),
      pullDone: false,
    };
    this.runs.set(run.key, run);
    this.writeStatus(run);
    const missing = pod.spec.containers.find(
      (container) => this.options.imageMap[container.image ?? ''] === undefined,
    );
    try {
      if (this.options.pullGate !== undefined) {
        for (const container of pod.spec.containers)
          await this.options.pullGate(pod, container.image ?? '');
      }
      if (this.options.imagePullDelayMs !== undefined && this.options.imagePullDelayMs > 0) {
        await new Promise((resolve) => setTimeout(resolve, this.options.imagePullDelayMs));
      }
    } catch {
      // A rejected gate is a failed pull.
    }
    run.pullDone = true;
    if (this.runs.get(run.key) !== run || run.phase !== 'pulling') return;
    if (missing !== undefined) {
      run.phase = 'pull-failed';
      run.pullFailedAt = this.clock.now();
      for (const container of run.containers) {
        if (this.options.imageMap[container.spec.image ?? ''] === undefined) {
          container.state = {
            waiting: {
              reason: 'ErrImagePull',
              message: `failed to pull and unpack image "${container.spec.image ?? ''}": not found in the kubelet simulator's image map`,
            },
          };
        }
      }
      this.writeStatus(run);
      return;
    }
    await this.launch(run);
  }

  /**
   * Reads the Secrets and ConfigMaps the pod names (env, envFrom, volumes) as the kubelet does,
   * before anything starts. A refusal (the Node authorizer has not yet seen the pod bound here)
   * or a failed read is a config error, retried on tick.
   */
  private async podObjects(pod: Pod): Promise<ObjectLookup> {
    const namespace = pod.metadata.namespace ?? '';
    const secretNames = new Set<string>();
    const configMapNames = new Set<string>();
    for (const container of [...pod.spec.containers, ...(pod.spec.initContainers ?? [])]) {
      for (const variable of container.env ?? []) {
        if (variable.valueFrom?.secretKeyRef) secretNames.add(variable.valueFrom.secretKeyRef.name);
        if (variable.valueFrom?.configMapKeyRef)
          configMapNames.add(variable.valueFrom.configMapKeyRef.name);
      }
      const envFrom =
        (
          container as {
            envFrom?: { secretRef?: { name: string }; configMapRef?: { name: string } }[];
          }
        ).envFrom ?? [];
      for (const source of envFrom) {
        if (source.secretRef) secretNames.add(source.secretRef.name);
        if (source.configMapRef) configMapNames.add(source.configMapRef.name);
      }
    }
    for (const volume of pod.spec.volumes ?? []) {
      if (volume.secret) secretNames.add(volume.secret.secretName);
      if (volume.configMap) configMapNames.add(volume.configMap.name);
      for (const source of volume.projected?.sources ?? []) {
        if (source.secret) secretNames.add(source.secret.name);
        if (source.configMap) configMapNames.add(source.configMap.name);
      }
    }
    const secrets = new Map<string, Secret | undefined>();
    const configMaps = new Map<string, ConfigMap | undefined>();
    try {
      for (const name of secretNames)
        secrets.set(name, await this.backend.readSecret(namespace, name));
      for (const name of configMapNames)
        configMaps.set(name, await this.backend.readConfigMap(namespace, name));
    } catch (error) {
      if (error instanceof NodeApiError) throw new ContainerConfigError(error.message);
      throw error;
    }
    return { secret: (name) => secrets.get(name), configMap: (name) => configMaps.get(name) };
  }

  /** Resolves env and volumes, then spawns each container; a config error is retried on tick. */
  private async launch(run: PodRun): Promise<void> {
    const pod = this.currentPod(run);
    if (pod === undefined) return;
    run.phase = 'pulling';
    const environments: Record<string, string>[] = [];
    try {
      const objects = await this.podObjects(pod);
      run.objects = objects;
      await this.writeVolumes(run, pod, objects);
      for (const container of run.containers)
        environments.push(containerEnvironment(pod, container.spec, objects));
    } catch (error) {
      if (!(error instanceof ContainerConfigError)) throw error;
      if (this.runs.get(run.key) !== run) return;
      run.phase = 'config-error';
      for (const container of run.containers) {
        container.state = {
          waiting: { reason: 'CreateContainerConfigError', message: error.message },
        };
      }
      this.writeStatus(run);
      return;
    }
    if (this.runs.get(run.key) !== run || this.stopped) return;
    run.phase = 'running';
    run.containers.forEach((container, index) =>
      this.spawnContainer(run, pod, container, environments[index] ?? {}),
    );
    this.writeStatus(run);
  }

  private spawnContainer(
    run: PodRun,
    pod: Pod,
    container: RunningContainer,
    podEnv: Record<string, string>,
  ): void {
    const image = this.options.imageMap[container.spec.image ?? ''] ?? {};
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOSTNAME: run.name,
      KUBERNETES_SERVICE_HOST: new URL(this.backend.url).hostname,
      KUBERNETES_SERVICE_PORT: new URL(this.backend.url).port,
      ...(this.options.baseEnv ?? {}),
      ...(image.env ?? {}),
      ...podEnv,
      [VOLUME_ROOT_ENV]: join(run.dir, 'mounts'),
    };
    const expand = (values: string[]) => values.map((value) => expandReferences(value, podEnv));
    let argv: string[];
    if (container.spec.command !== undefined && container.spec.command.length > 0) {
      argv = [...expand(container.spec.command), ...expand(container.spec.args ?? [])];
    } else {
      argv = [
        ...(image.entrypoint ?? []),
        ...(container.spec.args !== undefined ? expand(container.spec.args) : (image.cmd ?? [])),
      ];
    }
    const [program, ...rest] = argv;
    if (program === undefined) {
      container.state = {
        waiting: { reason: 'CreateContainerError', message: 'no command specified' },
      };
      return;
    }
    const binary = image.binaries?.[program] ?? image.binaries?.[posix.basename(program)];
    const [executable, ...prefix] = binary ?? [program];
    const cwd = container.spec.workingDir
      ? join(run.dir, 'mounts', container.spec.workingDir)
      : join(run.dir, 'work');
    mkdirSync(cwd, { recursive: true });
    const terminationLog = join(
      run.dir,
      'mounts',
      container.spec.terminationMessagePath ?? '/dev/termination-log',
    );
    mkdirSync(dirname(terminationLog), { recursive: true });
    const log = createWriteStream(join(run.dir, 'logs', `${container.spec.name}.log`), {
      flags: 'a',
    });
    container.log = log;
    const child = spawn(executable ?? program, [...prefix, ...rest], {
      cwd,
      env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    container.process = child;
    container.startedAt = this.clock.now();
    container.state = { running: { startedAt: rfc3339(container.startedAt) } };
    child.stdout?.pipe(log, { end: false });
    child.stderr?.pipe(log, { end: false });
    child.on('error', (error) => {
      container.state = {
        terminated: {
          exitCode: 128,
          reason: 'StartError',
          message: `failed to start container: ${error.message}`,
          startedAt: rfc3339(container.startedAt ?? this.clock.now()),
          finishedAt: rfc3339(this.clock.now()),
        },
      };
      container.process = undefined;
      this.afterExit(run);
    });
    child.on('exit', (code, signal) => {
      if (container.process !== child) return;
      container.process = undefined;
      const exitCode = code ?? 128 + signalNumber(signal);
      let reason = exitCode === 0 ? 'Completed' : 'Error';
      if (container.oomKilled) reason = 'OOMKilled';
      let message: string | undefined;
      if (existsSync(terminationLog)) {
        const text = readFileSync(terminationLog, 'utf8');
        if (text !== '') message = text.slice(0, 4096);
      }
      container.state = {
        terminated: {
          exitCode,
          reason,
          ...(signal ? { signal: signalNumber(signal) } : {}),
          ...(message !== undefined ? { message } : {}),
          startedAt: rfc3339(container.startedAt ?? this.clock.now()),
          finishedAt: rfc3339(this.clock.now()),
          containerID: `kube-double://${child.pid ?? 0}`,
        },
      };
      this.afterExit(run);
    });
  }

  private afterExit(run: PodRun): void {
    if (this.runs.get(run.key) !== run) return;
    const pod = this.currentPod(run);
    if (run.phase === 'terminating') {
      if (run.containers.every((container) => container.process === undefined)) {
        void this.removePod(run.namespace, run.name, run.uid);
      } else this.writeStatus(run);
      return;
    }
    const policy = pod?.spec.restartPolicy ?? 'Always';
    if (pod !== undefined && !run.deadlineExceeded && policy !== 'Never') {
      for (const container of run.containers) {
        const terminated = container.state.terminated;
        if (terminated === undefined || container.process !== undefined) continue;
        if (policy === 'Always' || terminated.exitCode !== 0) {
          container.restartCount += 1;
          const env = this.safeEnvironment(run, pod, container.spec);
          if (env !== undefined) this.spawnContainer(run, pod, container, env);
        }
      }
    }
    if (run.containers.every((container) => container.process === undefined))
      run.phase = 'finished';
    this.writeStatus(run);
  }

  private safeEnvironment(
    run: PodRun,
    pod: Pod,
    container: Container,
  ): Record<string, string> | undefined {
    try {
      return run.objects === undefined
        ? undefined
        : containerEnvironment(pod, container, run.objects);
    } catch {
      return undefined;
    }
  }

  private terminate(run: PodRun, pod: Pod): void {
    const deletion = Date.parse(pod.metadata.deletionTimestamp ?? '');
    const wasRunning = run.phase === 'running';
    run.phase = 'terminating';
    run.killAt = Number.isNaN(deletion) ? this.clock.now() : deletion;
    if (!wasRunning || run.containers.every((container) => container.process === undefined)) {
      void this.removePod(run.namespace, run.name, run.uid);
      return;
    }
    for (const container of run.containers) signalGroup(container.process, 'SIGTERM');
    this.writeStatus(run);
  }

  /** The time-driven part of the kubelet: call (and await) it after advancing a ManualClock. */
  tick(): Promise<void> {
    // One tick at a time: a caller's tick waits for the timer's and then runs its own.
    const previous = this.ticking ?? Promise.resolve();
    const next = previous.then(() => this.tickOnce());
    this.ticking = next.catch(() => undefined);
    return next;
  }

  private async tickOnce(): Promise<void> {
    if (this.stopped) return;
    const now = this.clock.now();
    for (const run of [...this.runs.values()]) {
      const pod = this.currentPod(run);
      if (pod === undefined) continue;
      if (run.phase === 'terminating' && run.killAt !== undefined && now >= run.killAt) {
        for (const container of run.containers) signalGroup(container.process, 'SIGKILL');
      }
      if (run.phase === 'config-error') await this.launch(run);
      if (
        run.phase === 'pull-failed' &&
        run.pullFailedAt !== undefined &&
        now - run.pullFailedAt >= 1000
      ) {
        for (const container of run.containers) {
          if (container.state.waiting?.reason === 'ErrImagePull') {
            container.state = {
              waiting: {
                reason: 'ImagePullBackOff',
                message: `Back-off pulling image "${container.spec.image ?? ''}"`,
              },
            };
          }
        }
        this.writeStatus(run);
      }
      const deadline = pod.spec.activeDeadlineSeconds;
      if (
        deadline !== undefined &&
        !run.deadlineExceeded &&
        run.phase !== 'finished' &&
        run.phase !== 'terminating' &&
        now - run.startTime >= deadline * 1000
      ) {
        run.deadlineExceeded = true;
        for (const container of run.containers) signalGroup(container.process, 'SIGKILL');
        if (run.containers.every((container) => container.process === undefined)) {
          run.phase = 'finished';
          this.writeStatus(run);
        }
      }
      if (run.phase === 'running') {
        for (const token of run.tokens) {
          if (now >= token.refreshAt) {
            // A failed refresh keeps the old token (still valid for a while) and retries next tick.
            await this.writeToken(run, pod, token).catch(() => undefined);
          }
        }
        this.enforceMemoryLimits(run);
      }
    }
  }

  /** A container whose resident memory passes its limit is killed and reported OOMKilled. */
  private enforceMemoryLimits(run: PodRun): void {
    for (const container of run.containers) {
      const limit = container.spec.resources?.limits?.memory;
      const pid = container.process?.pid;
      if (limit === undefined || pid === undefined) continue;
      const resident = residentBytes(pid);
      if (resident !== undefined && resident > bytes(limit)) {
        container.oomKilled = true;
        signalGroup(container.process, 'SIGKILL');
      }
    }
  }

  private async writeVolumes(run: PodRun, pod: Pod, objects: ObjectLookup): Promise<void> {
    run.tokens = [];
    for (const volume of pod.spec.volumes ?? []) {
      const targets = this.mountTargets(run, pod, volume.name);
      if (targets.length === 0) continue;
      const write = (path: string, content: string | Buffer) => {
        for (const target of targets) {
          const file = join(target, path);
          mkdirSync(dirname(file), { recursive: true });
          writeFileSync(file, content, { mode: 0o600 });
        }
      };
      for (const target of targets) mkdirSync(target, { recursive: true });
      if (volume.secret)
        this.writeKeys(
          write,
          this.secretData(objects, volume.secret.secretName, volume.secret.optional),
          volume.secret.items,
        );
      if (volume.configMap)
        this.writeKeys(
          write,
          this.configMapData(objects, volume.configMap.name, volume.configMap.optional),
          volume.configMap.items,
        );
      for (const source of volume.projected?.sources ?? []) {
        if (source.serviceAccountToken) {
          const token: ProjectedToken = {
            file: targets.map((target) =>
              join(target, source.serviceAccountToken?.path ?? 'token'),
            ),
            audience: source.serviceAccountToken.audience,
            expirationSeconds: source.serviceAccountToken.expirationSeconds ?? 3600,
            refreshAt: 0,
          };
          try {
            await this.writeToken(run, pod, token);
          } catch (error) {
            // The kubelet cannot mount the volume: the pod stays in ContainerCreating, retried.
            if (error instanceof NodeApiError)
              throw new ContainerConfigError(
                `MountVolume.SetUp failed for volume "${volume.name}": ${error.message}`,
              );
            throw error;
          }
          run.tokens.push(token);
        }
        if (source.secret)
          this.writeKeys(
            write,
            this.secretData(objects, source.secret.name, source.secret.optional),
            source.secret.items,
          );
        if (source.configMap)
          this.writeKeys(
            write,
            this.configMapData(objects, source.configMap.name, source.configMap.optional),
            source.configMap.items,
          );
        for (const item of source.downwardAPI?.items ?? []) {
          if (item.fieldRef?.fieldPath === 'metadata.namespace') write(item.path, run.namespace);
          else if (item.fieldRef?.fieldPath === 'metadata.name') write(item.path, run.name);
          else if (item.fieldRef?.fieldPath === 'metadata.uid') write(item.path, run.uid);
        }
      }
    }
  }

  private writeKeys(
    write: (path: string, content: string | Buffer) => void,
    data: Record<string, Buffer> | undefined,
    items?: KeyToPath[],
  ): void {
    if (data === undefined) return;
    if (items !== undefined && items.length > 0) {
      for (const item of items) {
        const value = data[item.key];
        if (value !== undefined) write(item.path, value);
      }
      return;
    }
    for (const [key, value] of Object.entries(data)) write(key, value);
  }

  private secretData(
    objects: ObjectLookup,
    name: string,
    optional?: boolean,
  ): Record<string, Buffer> | undefined {
    const secret = objects.secret(name);
    if (secret === undefined) {
      if (optional) return undefined;
      throw new ContainerConfigError(`secret "${name}" not found`);
    }
    return Object.fromEntries(
      Object.entries(secret.data ?? {}).map(([key, value]) => [key, Buffer.from(value, 'base64')]),
    );
  }

  private configMapData(
    objects: ObjectLookup,
    name: string,
    optional?: boolean,
  ): Record<string, Buffer> | undefined {
    const map = objects.configMap(name);
    if (map === undefined) {
      if (optional) return undefined;
      throw new ContainerConfigError(`configmap "${name}" not found`);
    }
    return Object.fromEntries(
      Object.entries(map.data ?? {}).map(([key, value]) => [key, Buffer.from(value)]),
    );
  }

  private mountTargets(run: PodRun, pod: Pod, volumeName: string): string[] {
    const targets = new Set<string>();
    for (const container of [...pod.spec.containers, ...(pod.spec.initContainers ?? [])]) {
      for (const mount of container.volumeMounts ?? []) {
        if (mount.name === volumeName) targets.add(join(run.dir, 'mounts', mount.mountPath));
      }
    }
    return [...targets];
  }

  private async writeToken(run: PodRun, pod: Pod, token: ProjectedToken): Promise<void> {
    const status = await this.backend.requestToken(
      run.namespace,
      pod.spec.serviceAccountName ?? 'default',
      {
        ...(token.audience !== undefined ? { audiences: [token.audience] } : {}),
        expirationSeconds: Math.max(token.expirationSeconds, 600),
        boundObjectRef: { kind: 'Pod', apiVersion: 'v1', name: run.name, uid: run.uid },
      },
    );
    for (const file of token.file) {
      mkdirSync(dirname(file), { recursive: true });
      // Written aside and renamed over, so a reader never sees a half-written token.
      writeFileSync(`${file}.tmp`, status.token, { mode: 0o600 });
      renameSync(`${file}.tmp`, file);
    }
    const issuedAt = this.clock.now();
    const lifetime = Date.parse(status.expirationTimestamp) - issuedAt;
    token.refreshAt = issuedAt + lifetime * TOKEN_REFRESH_FRACTION;
  }

  private currentPod(run: PodRun): Pod | undefined {
    const pod = this.pods.get(run.key);
    return pod?.metadata.uid === run.uid ? pod : undefined;
  }

  private writeStatus(run: PodRun): void {
    const pod = this.currentPod(run);
    if (pod === undefined) return;
    const now = rfc3339(this.clock.now());
    const statuses: ContainerStatus[] = run.containers.map((container) => ({
      name: container.spec.name,
      image: container.spec.image ?? '',
      imageID: container.state.waiting ? '' : `kube-double://${container.spec.image ?? ''}`,
      ready: container.state.running !== undefined && run.phase === 'running',
      started: container.state.running !== undefined,
      restartCount: container.restartCount,
      state: container.state,
    }));
    let phase = 'Pending';
    if (run.phase === 'running' || run.phase === 'terminating') phase = 'Running';
    if (run.phase === 'finished') {
      const failed =
        run.deadlineExceeded ||
        run.containers.some((container) => (container.state.terminated?.exitCode ?? 1) !== 0);
      phase = failed ? 'Failed' : 'Succeeded';
    }
    const ready = statuses.every((status) => status.ready) && phase === 'Running';
    const condition = (type: string, value: boolean, reason?: string): PodCondition => ({
      type,
      status: value ? 'True' : 'False',
      ...(reason !== undefined && !value ? { reason } : {}),
      lastProbeTime: null,
      lastTransitionTime: now,
    });
    const previous = new Map((pod.status?.conditions ?? []).map((c) => [c.type, c]));
    const keep = (next: PodCondition): PodCondition => {
      const old = previous.get(next.type);
      return old !== undefined && old.status === next.status && old.reason === next.reason
        ? old
        : next;
    };
    const conditions = [
      keep(condition('PodReadyToStartContainers', run.phase !== 'pulling')),
      keep(condition('Initialized', true)),
      keep(condition('Ready', ready, phase === 'Running' ? 'ContainersNotReady' : 'PodCompleted')),
      keep(
        condition(
          'ContainersReady',
          ready,
          phase === 'Running' ? 'ContainersNotReady' : 'PodCompleted',
        ),
      ),
      previous.get('PodScheduled') ?? condition('PodScheduled', true),
    ];
    const status: NonNullable<Pod['status']> = {
      ...(pod.status ?? {}),
      phase,
      conditions,
      hostIP: '127.0.0.1',
      hostIPs: [{ ip: '127.0.0.1' }],
      podIP: '127.0.0.1',
      podIPs: [{ ip: '127.0.0.1' }],
      startTime: rfc3339(run.startTime),
      containerStatuses: statuses,
    };
    if (run.deadlineExceeded) {
      status.reason = 'DeadlineExceeded';
      status.message = `Pod was active on the node longer than the specified deadline`;
    }
    // Status writes of one pod go out in order; a failed one is superseded by the next.
    run.writes = run.writes
      .then(() => this.backend.writePodStatus(run.namespace, run.name, run.uid, status))
      .catch((error: Error) => debug(`status of ${run.key}: ${error.message}`));
  }

  private async removePod(namespace: string, name: string, uid: string): Promise<void> {
    const run = this.runs.get(`${namespace}/${name}`);
    if (run !== undefined && run.uid === uid) this.forget(run, 'SIGKILL');
    await run?.writes;
    await this.backend.removePod(namespace, name, uid).catch(() => undefined);
  }

  private forget(run: PodRun, signal: NodeJS.Signals): void {
    if (this.runs.get(run.key) === run) this.runs.delete(run.key);
    for (const container of run.containers) {
      signalGroup(container.process, signal);
      container.log?.end();
    }
  }

  private readLog(namespace: string, name: string, container?: string): string | undefined {
    const run = this.runs.get(`${namespace}/${name}`);
    const dir = run?.dir;
    if (dir === undefined) return undefined;
    const chosen = container ?? run?.containers[0]?.spec.name ?? '';
    const file = join(dir, 'logs', `${chosen}.log`);
    return existsSync(file) ? readFileSync(file, 'utf8') : '';
  }

  /** Stops every pod's processes (SIGKILL) and marks the node NotReady. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    clearInterval(this.heartbeatTimer);
    this.unsubscribe();
    const exits: Promise<void>[] = [];
    for (const run of [...this.runs.values()]) {
      for (const container of run.containers) {
        const child = container.process;
        if (child !== undefined && child.exitCode === null) {
          exits.push(new Promise((resolve) => child.once('exit', () => resolve())));
        }
      }
      this.forget(run, 'SIGKILL');
    }
    await Promise.all(exits);
    await this.backend.close();
  }
}

function signalGroup(child: ChildProcess | undefined, signal: NodeJS.Signals): void {
  if (child?.pid === undefined || child.exitCode !== null) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    try {
      child.kill(signal);
    } catch {
      // already gone
    }
  }
}

const SIGNALS: Record<string, number> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGABRT: 6,
  SIGKILL: 9,
  SIGSEGV: 11,
  SIGPIPE: 13,
  SIGTERM: 15,
};

function signalNumber(signal: NodeJS.Signals | null): number {
  return signal === null ? 0 : (SIGNALS[signal] ?? 0);
}

function residentBytes(pid: number): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
    return match ? Number(match[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

export function startKubelet(options: KubeletOptions): Kubelet {
  return new Kubelet(options);
}
