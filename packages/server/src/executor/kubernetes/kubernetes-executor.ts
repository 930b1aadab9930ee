import {
  CoreV1Api,
  KubeConfig,
  makeInformer,
  type Informer,
  type ObjectCache,
  type V1Pod,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { AttemptIdentity } from '../../auth/agent-token.js';
import type { KubernetesExecutorConfig } from '../../config/server-config.js';
import type {
  ClaimProbe,
  Executor,
  ExecutorPosture,
  PendingClaim,
  StartedAgent,
} from '../executor.js';
import type { AttemptLaunch } from '../../attempts/attempt-launch.js';
import type { AgentExit } from '../../attempts/attempt-lifecycle.js';
import { allowlistOf } from './allowlist.js';
import { BootstrapSecrets } from './bootstrap-secrets.js';
import { IDENTITY_ANNOTATION, LABEL, MANAGED_BY, labelValue } from './labels.js';
import { buildAttemptPod, type KubernetesTenantPlacement } from './pod-builder.js';
import { podOutcome, type PodFailureCause } from './pod-outcome.js';
import { envvarTransport, kubernetesPosture, type PodTokenTransport } from './token-transport.js';

export interface KubernetesExecutorOptions {
  config: KubernetesExecutorConfig;
  /** a loaded kubeconfig; default: config.kubeconfig, or in-cluster when that is null */
  kubeConfig?: KubeConfig;
  /**
   * Is this dispatch of the attempt still the live one? Asked of pods found on (re)start that
   * this process did not create: a pod whose attempt has moved on is deleted, not adopted.
   */
  attemptLive(identity: AttemptIdentity): Promise<boolean>;
  logger: Logger;
  /** epoch ms; injectable so the pod-start timeout is tested without waiting */
  now?: () => number;
  /** how often Pending pods are checked against the pod-start timeout (ms) */
  sweepIntervalMs?: number;
  name?: string;
  /** auth.agent_token_transport; envvar when absent */
  transport?: PodTokenTransport;
}

/** A stable, sanitised error: the API's status and reason word only, never a response body. */
export class KubernetesExecutorError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'KubernetesExecutorError';
  }
}

/**
 * What a Kubernetes API failure may say: its HTTP status and the Status reason (an enumerated
 * word). The body's message can quote the object sent — a pod spec holding the attempt token —
 * so neither it nor the client's own message (which embeds the body) is ever repeated.
 */
export function describeKubeError(err: unknown): string {
  const e = err as { code?: unknown; body?: unknown; cause?: { code?: unknown } };
  if (typeof e?.code === 'number') {
    let reason = '';
    try {
      const body: unknown = typeof e.body === 'string' ? JSON.parse(e.body) : e.body;
      const r = (body as { reason?: unknown } | undefined)?.reason;
      if (typeof r === 'string' && /^[A-Za-z]{1,40}$/.test(r)) reason = ` ${r}`;
    } catch {
      // no reason then
    }
    return `HTTP ${e.code}${reason}`;
  }
  const sys = typeof e?.code === 'string' ? e.code : e?.cause?.code;
  if (typeof sys === 'string' && /^[A-Z_]{2,40}$/.test(sys)) return `network error ${sys}`;
  return 'request failed';
}

function statusOf(err: unknown): number | undefined {
  const c = (err as { code?: unknown })?.code;
  return typeof c === 'number' ? c : undefined;
}

interface Identified {
  identity: AttemptIdentity;
  namespace: string;
  name: string;
}

function str(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

/** The attempt a pod belongs to, from its identity annotation (the exact, unsanitised one). */
function identityOf(pod: V1Pod): AttemptIdentity | undefined {
  const raw = pod.metadata?.annotations?.[IDENTITY_ANNOTATION];
  if (!raw) return undefined;
  try {
    const v = JSON.parse(raw) as Record<string, unknown>;
    if (typeof v.ti !== 'string' || v.ti === '' || typeof v.try !== 'number') return undefined;
    return {
      task_instance_id: v.ti,
      tenant_id: str(v.tenant),
      dag_id: str(v.dag),
      dag_run_id: '',
      run_id: str(v.run),
      task_id: str(v.task),
      try_number: v.try,
      dispatch_gen: typeof v.gen === 'number' ? v.gen : 0,
    };
  } catch {
    return undefined;
  }
}

function attemptKey(ti: string, tryNumber: number): string {
  return `${ti}#${tryNumber}`;
}

/**
 * One pod per attempt. The pod's status, from a watch on each tenant namespace (filtered to
 * this control plane's pods by label), is where outcomes come from when the agent cannot report
 * them: an OOM kill, an image that never pulls, a pod no node takes, the deadline. A finished
 * pod is deleted once its outcome is handed on. Pods outlive the control plane (as detached
 * agents do on Lite): a restarted one lists them, adopts those whose attempt is still live and
 * deletes the rest, so nothing is left running that nobody owns.
 */
export class KubernetesExecutor implements Executor {
  readonly name: string;
  readonly posture: ExecutorPosture;
  private readonly transport: PodTokenTransport;
  private readonly core: CoreV1Api;
  private readonly kc: KubeConfig;
  private readonly cfg: KubernetesExecutorConfig;
  private readonly now: () => number;
  private readonly informers = new Map<string, Informer<V1Pod> & ObjectCache<V1Pod>>();
  private readonly synced = new Map<string, boolean>();
  private readonly listeners: ((exit: AgentExit) => void)[] = [];
  /** pods this process created, until they are gone (the watch may not have seen them yet) */
  private readonly created = new Map<string, Identified>();
  /** pods whose outcome was handed on (by uid), so a repeat event is not a second exit */
  private readonly reported = new Set<string>();
  /** pods first seen after a restart, checked against the store once */
  private readonly checked = new Set<string>();
  private readonly ready: Promise<void>;
  private sweepTimer: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly selector: string;
  /** auth.exchange_bootstrap=secret_key_ref only */
  private readonly secrets: BootstrapSecrets | null;

  constructor(private readonly opts: KubernetesExecutorOptions) {
    this.cfg = opts.config;
    this.name = opts.name ?? 'kubernetes';
    this.now = opts.now ?? Date.now;
    this.transport = opts.transport ?? envvarTransport;
    this.posture = kubernetesPosture(this.transport);
    if (opts.kubeConfig) {
      this.kc = opts.kubeConfig;
    } else {
      this.kc = new KubeConfig();
      if (this.cfg.kubeconfig) this.kc.loadFromFile(this.cfg.kubeconfig);
      else this.kc.loadFromCluster();
    }
    this.core = this.kc.makeApiClient(CoreV1Api);
    this.secrets = this.transport.bootstrapSecret
      ? new BootstrapSecrets(this.core, { instance: this.cfg.instance, executor: this.name })
      : null;
    this.selector = [
      `${LABEL.managedBy}=${MANAGED_BY}`,
      `${LABEL.instance}=${labelValue(this.cfg.instance)}`,
      `${LABEL.executor}=${labelValue(this.name)}`,
    ].join(',');
    this.ready = Promise.all(
      [...new Set(Object.values(this.cfg.tenants).map((t) => t.namespace))].map((ns) =>
        this.watchNamespace(ns),
      ),
    ).then(() => undefined);
    this.sweepTimer = setInterval(() => this.sweep(), opts.sweepIntervalMs ?? 2_000);
    this.sweepTimer.unref();
  }

  /** The posture for a configuration (doctor asks with no executor running). */
  static postureFor(
    _cfg: KubernetesExecutorConfig | null,
    transport: PodTokenTransport = envvarTransport,
  ): ExecutorPosture {
    return kubernetesPosture(transport);
  }

  /** Resolves once every namespace's pods have been listed (or the list failed). */
  whenSynced(): Promise<void> {
    return this.ready;
  }

  private watchNamespace(namespace: string): Promise<void> {
    const informer = makeInformer<V1Pod>(
      this.kc,
      `/api/v1/namespaces/${namespace}/pods`,
      () => this.core.listNamespacedPod({ namespace, labelSelector: this.selector }),
      this.selector,
    );
    this.informers.set(namespace, informer);
    const onPod = (pod: V1Pod) => this.observe(pod);
    informer.on('add', onPod);
    informer.on('update', onPod);
    informer.on('delete', (pod) => this.forget(pod));
    let failed = false;
    informer.on('error', (err: unknown) => {
      failed = true;
      if (this.closed) return;
      this.opts.logger.warn(
        { namespace, error: describeKubeError(err) },
        'the pod watch failed; listing and watching again shortly',
      );
      // A failed list or a broken watch: start over (list, then watch from its version).
      setTimeout(() => {
        if (!this.closed) void informer.start().then(() => this.synced.set(namespace, true));
      }, 1_000).unref();
    });
    return informer.start().then(
      () => {
        if (!failed) this.synced.set(namespace, true);
      },
      () => undefined,
    );
  }

  private placementFor(tenantId: string): KubernetesTenantPlacement {
    const t = this.cfg.tenants[tenantId];
    if (!t) {
      throw new KubernetesExecutorError(
        'LF_EXECUTOR_NOT_CONFIGURED',
        `tenant "${tenantId}" has no namespace in executor.kubernetes.tenants; add one (namespace, images, service_accounts) for it`,
      );
    }
    return { namespace: t.namespace, allowlist: allowlistOf(t, this.cfg.agentImage) };
  }

  async start(launch: AttemptLaunch): Promise<StartedAgent> {
    const { identity } = launch;
    const placement = this.placementFor(identity.tenant_id);
    const task = launch.task ?? { execution_timeout_seconds: null };
    // Minted last before the create: nothing failing earlier leaves a token behind. Under the
    // exchange nothing is minted here: the agent obtains its token from its pod's projected one.
    const token = this.transport.mintsAtCreate ? await launch.credential.mint() : '';
    const pod = buildAttemptPod({
      identity,
      token,
      transport: this.transport,
      agentUrl: this.cfg.agentUrl ?? launch.agentUrl,
      heartbeatIntervalMs: launch.heartbeatIntervalMs,
      task,
      placement,
      instance: this.cfg.instance,
      executorName: this.name,
      runAsUser: this.cfg.runAsUser,
      podStartTimeoutMs: this.cfg.podStartTimeoutMs,
      terminationGracePeriodSeconds: this.cfg.terminationGracePeriodSeconds,
      agentCa: this.cfg.agentCaConfigMap
        ? { configMap: this.cfg.agentCaConfigMap.name, key: this.cfg.agentCaConfigMap.key }
        : null,
    });
    const name = pod.metadata!.name!;
    const key = attemptKey(identity.task_instance_id, identity.try_number);
    // The bootstrap Secret first: the pod references it, and the kubelet must not meet it missing.
    let secretCreated = false;
    if (this.secrets) {
      try {
        secretCreated = await this.secrets.create(
          this.secrets.build(placement.namespace, name, identity),
        );
      } catch (err) {
        throw new KubernetesExecutorError(
          'LF_POD_CREATE_FAILED',
          `LF_POD_CREATE_FAILED: could not create the bootstrap Secret of pod ${name} in namespace ${placement.namespace} (${describeKubeError(err)}); check the control plane's RBAC (apply deploy/components/exchange-secret-fallback) and that the namespace exists`,
        );
      }
    }
    this.created.set(key, { identity, namespace: placement.namespace, name });
    let uid: string | undefined;
    try {
      const made = await this.core.createNamespacedPod({
        namespace: placement.namespace,
        body: pod,
      });
      uid = made.metadata?.uid;
    } catch (err) {
      // The same dispatch's pod already exists (a retried create): it is this attempt's pod. A
      // Secret made just now is not the one it references (that one was exchanged or is gone).
      if (statusOf(err) === 409) {
        if (secretCreated) await this.removeSecret(placement.namespace, name);
        return { hostname: name };
      }
      this.created.delete(key);
      if (this.secrets) await this.removeSecret(placement.namespace, name);
      throw new KubernetesExecutorError(
        'LF_POD_CREATE_FAILED',
        `LF_POD_CREATE_FAILED: could not create pod ${name} in namespace ${placement.namespace} (${describeKubeError(err)}); check the control plane's RBAC and that the namespace exists`,
      );
    }
    if (this.secrets) {
      try {
        if (!uid) throw new Error('the pod create answered no uid');
        await this.secrets.own(placement.namespace, name, uid);
      } catch (err) {
        // Unowned, the exchange refuses the Secret: fail the start now, leaving nothing behind.
        this.created.delete(key);
        await this.deletePod({ metadata: { name, namespace: placement.namespace } }, 0);
        await this.removeSecret(placement.namespace, name);
        throw new KubernetesExecutorError(
          'LF_POD_CREATE_FAILED',
          `LF_POD_CREATE_FAILED: could not make pod ${name} the owner of its bootstrap Secret in namespace ${placement.namespace} (${describeKubeError(err)}); check the control plane's RBAC (secrets patch, deploy/components/exchange-secret-fallback)`,
        );
      }
    }
    return { hostname: name };
  }

  /** The attempt's bootstrap Secret, gone with its attempt (garbage collection is the backstop). */
  private async removeSecret(namespace: string | undefined, podName: string | undefined) {
    if (!this.secrets || !namespace || !podName) return;
    try {
      await this.secrets.remove(namespace, podName);
    } catch (err) {
      this.opts.logger.warn(
        { namespace, pod: podName, error: describeKubeError(err) },
        'could not delete a bootstrap Secret; garbage collection removes it with its pod',
      );
    }
  }

  /** The cached pods of this executor for an attempt (any dispatch). */
  private podsOf(taskInstanceId: string, tryNumber: number): V1Pod[] {
    const out: V1Pod[] = [];
    for (const inf of this.informers.values()) {
      for (const pod of inf.list()) {
        const id = identityOf(pod);
        if (id?.task_instance_id === taskInstanceId && id.try_number === tryNumber) out.push(pod);
      }
    }
    return out;
  }

  /**
   * From the watch's cache, once it has listed every namespace: the claim's pod (same try and
   * dispatch) is alive while it runs, starting while Pending (up to its pod-start timeout), gone
   * when it has finished or does not exist. Unknown while a namespace could not be listed.
   */
  async probeClaim(claim: PendingClaim, now: number): Promise<ClaimProbe> {
    await this.ready;
    if ([...this.informers.keys()].some((ns) => !this.synced.get(ns))) return { state: 'unknown' };
    const pod = this.podsOf(claim.task_instance_id, claim.try_number).find(
      (p) => (identityOf(p)?.dispatch_gen ?? 0) === claim.dispatch_gen,
    );
    if (!pod || pod.metadata?.deletionTimestamp) return { state: 'gone' };
    const outcome = podOutcome(pod, now, this.cfg.podStartTimeoutMs);
    switch (outcome.kind) {
      case 'running':
        return { state: 'alive' };
      case 'starting':
        return { state: 'starting', until: outcome.until };
      default:
        return { state: 'gone' };
    }
  }

  /** A pod event: hand on an outcome once, delete what is finished, adopt or drop what is found. */
  private observe(pod: V1Pod): void {
    const identity = identityOf(pod);
    const uid = pod.metadata?.uid ?? pod.metadata?.name ?? '';
    if (!identity || this.closed) return;
    const key = attemptKey(identity.task_instance_id, identity.try_number);
    const mine = this.created.get(key)?.name === pod.metadata?.name;
    if (!mine && !this.checked.has(uid)) {
      this.checked.add(uid);
      void this.adoptOrDrop(pod, identity);
    }
    if (this.reported.has(uid) || pod.metadata?.deletionTimestamp) return;
    const outcome = podOutcome(pod, this.now(), this.cfg.podStartTimeoutMs);
    if (outcome.kind === 'ended') {
      this.report(pod, identity, outcome.exitCode, outcome.cause);
      void this.removeSecret(pod.metadata?.namespace, pod.metadata?.name);
      if (!this.cfg.keepFinishedPods) void this.deletePod(pod, 0);
    } else if (outcome.kind === 'cannot-start') {
      this.report(pod, identity, null, outcome.cause);
      void this.removeSecret(pod.metadata?.namespace, pod.metadata?.name);
      void this.deletePod(pod, 0);
    }
  }

  /** A pod found that this process did not create: kept if its attempt is live, else deleted. */
  private async adoptOrDrop(pod: V1Pod, identity: AttemptIdentity): Promise<void> {
    let live: boolean;
    try {
      live = await this.opts.attemptLive(identity);
    } catch {
      // An inconclusive read keeps the pod: the reapers decide its attempt, and its next event
      // (or the next restart) asks again.
      this.checked.delete(pod.metadata?.uid ?? '');
      return;
    }
    if (live) return;
    await this.removeSecret(pod.metadata?.namespace, pod.metadata?.name);
    const outcome = podOutcome(pod, this.now(), this.cfg.podStartTimeoutMs);
    if (outcome.kind === 'ended' && this.cfg.keepFinishedPods) return;
    this.opts.logger.info(
      { namespace: pod.metadata?.namespace, pod: pod.metadata?.name },
      'deleting a pod whose attempt is no longer live',
    );
    this.reported.add(pod.metadata?.uid ?? '');
    await this.deletePod(pod, this.cfg.terminationGracePeriodSeconds);
  }

  private report(
    pod: V1Pod,
    identity: AttemptIdentity,
    exitCode: number | null,
    cause: PodFailureCause | null,
  ): void {
    this.reported.add(pod.metadata?.uid ?? '');
    const exit: AgentExit = { identity, exitCode, signal: null, ...(cause ? { cause } : {}) };
    for (const l of this.listeners) l(exit);
  }

  private forget(pod: V1Pod): void {
    const identity = identityOf(pod);
    if (identity) {
      const key = attemptKey(identity.task_instance_id, identity.try_number);
      if (this.created.get(key)?.name === pod.metadata?.name) this.created.delete(key);
      // Deleted before it finished (by an operator, a node drain): its agent is gone unreported.
      const uid = pod.metadata?.uid ?? '';
      if (!this.reported.has(uid) && !this.closed) this.report(pod, identity, null, null);
      if (!this.closed) void this.removeSecret(pod.metadata?.namespace, pod.metadata?.name);
    }
    this.reported.delete(pod.metadata?.uid ?? '');
    this.checked.delete(pod.metadata?.uid ?? '');
  }

  /** Pending pods past their pod-start timeout fail without waiting for another event. */
  sweep(): void {
    for (const inf of this.informers.values()) for (const pod of inf.list()) this.observe(pod);
  }

  private async deletePod(pod: V1Pod, gracePeriodSeconds: number): Promise<void> {
    const name = pod.metadata?.name;
    const namespace = pod.metadata?.namespace;
    if (!name || !namespace) return;
    try {
      await this.core.deleteNamespacedPod({ name, namespace, gracePeriodSeconds });
    } catch (err) {
      if (statusOf(err) === 404) return;
      this.opts.logger.warn(
        { namespace, pod: name, error: describeKubeError(err) },
        'could not delete a pod; the next restart or event retries',
      );
    }
  }

  /** Deletes the attempt's pod with its grace period: the agent gets SIGTERM and stops its task. */
  async terminate(taskInstanceId: string, tryNumber: number): Promise<void> {
    const pods = this.podsOf(taskInstanceId, tryNumber);
    const made = this.created.get(attemptKey(taskInstanceId, tryNumber));
    const targets = new Map<string, { name: string; namespace: string }>();
    for (const p of pods)
      targets.set(`${p.metadata!.namespace}/${p.metadata!.name}`, {
        name: p.metadata!.name!,
        namespace: p.metadata!.namespace!,
      });
    if (made) targets.set(`${made.namespace}/${made.name}`, made);
    await Promise.all(
      [...targets.values()].map(async (t) => {
        await this.removeSecret(t.namespace, t.name);
        await this.deletePod(
          { metadata: { name: t.name, namespace: t.namespace } },
          this.cfg.terminationGracePeriodSeconds,
        );
      }),
    );
  }

  onAgentExit(listener: (exit: AgentExit) => void): void {
    this.listeners.push(listener);
  }

  running(): number {
    let n = 0;
    for (const inf of this.informers.values()) {
      for (const pod of inf.list()) {
        const phase = pod.status?.phase ?? 'Pending';
        if (
          (phase === 'Pending' || phase === 'Running') &&
          !this.reported.has(pod.metadata?.uid ?? '')
        )
          n++;
      }
    }
    return n;
  }

  /**
   * Stops watching. Pods are left running: they belong to attempts the store still holds, and
   * the next control plane adopts them (or deletes those whose attempt has moved on).
   */
  async close(): Promise<void> {
    this.closed = true;
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    await Promise.all([...this.informers.values()].map((i) => i.stop()));
  }
}
