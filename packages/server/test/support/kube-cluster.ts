import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import {
  ADMIN_USER,
  startApiServer,
  type ApiServerHandle,
  type ApiServerKind,
  type KubeDouble,
  type KubeDoubleOptions,
  type Kubelet,
  type KubeObject,
} from '@leoflow/kube-double';
import { agentImage } from './agent-image.js';

export { API_SERVER_KINDS, type ApiServerKind } from '@leoflow/kube-double';

/** The namespace label Pod Security Admission enforces: `restricted`, as a hardened cluster sets. */
export const RESTRICTED = { 'pod-security.kubernetes.io/enforce': 'restricted' };
/** `baseline`: what a default warm-pool pod needs (root with the attempt-uid capabilities). */
export const BASELINE = { 'pod-security.kubernetes.io/enforce': 'baseline' };

export interface KubeTestClusterOptions {
  /** The prefix of the cluster's scratch directory under the OS temp dir. */
  prefix: string;
  /** The double (default) or the real kube-apiserver (npm run kube:build). */
  kind?: ApiServerKind;
  /** Passed to startKubeDouble (a clock, static tokens, …); the double only. */
  double?: KubeDoubleOptions;
  /** Namespaces to create, each with the ServiceAccounts to create in it. */
  namespaces?: Record<string, readonly string[]>;
  /** Labels for the namespaces created (e.g. RESTRICTED). */
  namespaceLabels?: Record<string, string>;
  /** A kubelet simulator running every listed image as the built agent (agentImage()). */
  kubelet?: {
    nodeName?: string;
    agentImages: readonly string[];
    /** more environment for every container (the sandbox's writable paths of a test, say) */
    env?: Record<string, string>;
  };
}

export interface KubeTestCluster {
  kind: ApiServerKind;
  /** The apiserver, whichever it is: kubeconfigs, admin calls, list, watch. */
  api: ApiServerHandle;
  /** The double's internals; throws on the real apiserver (use api / pods() there). */
  double: KubeDouble;
  /** The scratch directory (kubeconfigs, the kubelet's work root); removed by stop(). */
  dir: string;
  /** Path of the admin kubeconfig, written into dir. */
  kubeconfig: string;
  /** @kubernetes/client-node's config loaded from that kubeconfig (admin). */
  adminConfig(): KubeConfig;
  /** Writes another kubeconfig into dir (a token's, a namespace's) and returns its path. */
  writeKubeconfig(options: { token?: string; namespace?: string; file: string }): string;
  /** The pods in the cluster now (in `namespace`, or all), read as the admin. */
  pods(namespace?: string): Promise<KubeObject[]>;
  /** The kubelet simulator, when one was asked for. */
  kubelet: Kubelet | undefined;
  /** Where the kubelet runs its pods (dir/kubelet). */
  kubeletRoot: string;
  /** Stops the kubelet, closes the apiserver and removes dir. */
  stop(): Promise<void>;
}

/**
 * An apiserver — the double (HTTPS, its scheduler) or the real kube-apiserver with its controller
 * manager and scheduler — on a local port, with the namespaces and ServiceAccounts a test needs
 * created as the cluster admin, and optionally the kubelet simulator running the agent image.
 * Tests start it in beforeAll and call stop() in afterAll, after closing whatever talks to it.
 */
export async function startKubeTestCluster(
  options: KubeTestClusterOptions,
): Promise<KubeTestCluster> {
  const kind = options.kind ?? 'double';
  const dir = mkdtempSync(join(tmpdir(), options.prefix));
  const kubeletRoot = join(dir, 'kubelet');
  let api: ApiServerHandle | undefined;
  let kubelet: Kubelet | undefined;
  const stop = async () => {
    await kubelet?.stop();
    await api?.close();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    api = await startApiServer(kind, { double: options.double });
    const labels = options.namespaceLabels;
    if (api.double !== undefined) {
      // In process: the double's own clock and store, so ManualClock tests stay synchronous.
      const { api: server } = api.double;
      const admin = server.context(ADMIN_USER);
      for (const [namespace, accounts] of Object.entries(options.namespaces ?? {})) {
        server.createObject(
          server.type('', 'namespaces'),
          undefined,
          { metadata: { name: namespace, ...(labels ? { labels } : {}) } },
          admin,
        );
        for (const name of accounts)
          server.createObject(
            server.type('', 'serviceaccounts'),
            namespace,
            { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name } },
            admin,
          );
      }
    } else {
      for (const [namespace, accounts] of Object.entries(options.namespaces ?? {})) {
        const created = await api.request('POST', '/api/v1/namespaces', {
          apiVersion: 'v1',
          kind: 'Namespace',
          metadata: { name: namespace, ...(labels ? { labels } : {}) },
        });
        if (created.status !== 201) throw new Error(`namespace ${namespace}: ${created.status}`);
        for (const name of accounts) {
          const sa = await api.request('POST', `/api/v1/namespaces/${namespace}/serviceaccounts`, {
            apiVersion: 'v1',
            kind: 'ServiceAccount',
            metadata: { name },
          });
          if (sa.status !== 201)
            throw new Error(`serviceaccount ${namespace}/${name}: ${sa.status}`);
        }
      }
    }
    if (options.kubelet) {
      kubelet = api.startKubelet({
        nodeName: options.kubelet.nodeName ?? 'node-a',
        workRoot: kubeletRoot,
        imageMap: Object.fromEntries(options.kubelet.agentImages.map((i) => [i, agentImage()])),
        allocatable: { cpu: '8', memory: '16Gi' },
        tickIntervalMs: 100,
        // A pod gets no CAP_SYS_ADMIN (PodSecurity baseline and restricted forbid it), so its
        // agent finds no namespaces and runs the per-uid fallback; the simulator runs pods on
        // the host as root, so it says so for them (docs/security.md, Kubernetes).
        baseEnv: { LEOFLOW_SANDBOX_ISOLATION: 'fallback', ...options.kubelet.env },
      });
      await kubelet.ready;
    }
  } catch (err) {
    await stop();
    throw err;
  }
  const started = api;
  const kubeconfig = started.kubeconfig(dir);
  return {
    kind,
    api: started,
    get double(): KubeDouble {
      if (started.double === undefined)
        throw new Error('this test cluster is the real kube-apiserver: use cluster.api');
      return started.double;
    },
    dir,
    kubeconfig,
    adminConfig: () => {
      const kc = new KubeConfig();
      kc.loadFromFile(kubeconfig);
      return kc;
    },
    writeKubeconfig: (o) => started.kubeconfig(dir, o),
    pods: (namespace) =>
      started.list(
        namespace === undefined ? '/api/v1/pods' : `/api/v1/namespaces/${namespace}/pods`,
      ),
    kubelet,
    kubeletRoot,
    stop,
  };
}
