import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import {
  ADMIN_USER,
  startKubeDouble,
  startKubelet,
  type KubeDouble,
  type KubeDoubleOptions,
  type Kubelet,
} from '@leoflow/kube-double';
import { agentImage } from './agent-image.js';

export interface KubeTestClusterOptions {
  /** The prefix of the cluster's scratch directory under the OS temp dir. */
  prefix: string;
  /** Passed to startKubeDouble (a clock, static tokens, …). */
  double?: KubeDoubleOptions;
  /** Namespaces to create, each with the ServiceAccounts to create in it. */
  namespaces?: Record<string, readonly string[]>;
  /** A kubelet simulator running every listed image as the built agent (agentImage()). */
  kubelet?: {
    nodeName?: string;
    agentImages: readonly string[];
    /** more environment for every container (the sandbox's writable paths of a test, say) */
    env?: Record<string, string>;
  };
}

export interface KubeTestCluster {
  double: KubeDouble;
  /** The scratch directory (kubeconfigs, the kubelet's work root); removed by stop(). */
  dir: string;
  /** Path of the admin kubeconfig, written into dir. */
  kubeconfig: string;
  /** @kubernetes/client-node's config loaded from that kubeconfig (admin). */
  adminConfig(): KubeConfig;
  /** Writes another kubeconfig into dir (a token's, a namespace's) and returns its path. */
  writeKubeconfig(options: { token?: string; namespace?: string; file: string }): string;
  /** The kubelet simulator, when one was asked for. */
  kubelet: Kubelet | undefined;
  /** Where the kubelet runs its pods (dir/kubelet). */
  kubeletRoot: string;
  /** Stops the kubelet, closes the double and removes dir. */
  stop(): Promise<void>;
}

/**
 * The kube-apiserver double (HTTPS, its scheduler) on a local port, with the namespaces and
 * ServiceAccounts a test needs created as the cluster admin, and optionally the kubelet simulator
 * running the agent image. Tests start it in beforeAll and call stop() in afterAll, after closing
 * whatever talks to it.
 */
export async function startKubeTestCluster(
  options: KubeTestClusterOptions,
): Promise<KubeTestCluster> {
  const dir = mkdtempSync(join(tmpdir(), options.prefix));
  const kubeletRoot = join(dir, 'kubelet');
  let double: KubeDouble | undefined;
  let kubelet: Kubelet | undefined;
  const stop = async () => {
    await kubelet?.stop();
    await double?.close();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    double = await startKubeDouble(options.double);
    const { api } = double;
    const admin = api.context(ADMIN_USER);
    for (const [namespace, accounts] of Object.entries(options.namespaces ?? {})) {
      api.createObject(
        api.type('', 'namespaces'),
        undefined,
        { metadata: { name: namespace } },
        admin,
      );
      for (const name of accounts)
        api.createObject(
          api.type('', 'serviceaccounts'),
          namespace,
          { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name } },
          admin,
        );
    }
    if (options.kubelet) {
      kubelet = startKubelet({
        double,
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
    }
  } catch (err) {
    await stop();
    throw err;
  }
  const started = double;
  const kubeconfig = started.kubeconfig(dir);
  return {
    double: started,
    dir,
    kubeconfig,
    adminConfig: () => {
      const kc = new KubeConfig();
      kc.loadFromFile(kubeconfig);
      return kc;
    },
    writeKubeconfig: (o) => started.kubeconfig(dir, o),
    kubelet,
    kubeletRoot,
    stop,
  };
}
