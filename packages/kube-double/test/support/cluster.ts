// The cluster a fidelity test talks to: the double (default), or a real cluster when KUBECONFIG
// is set in the environment (double-only cases skip themselves then: see the package README).
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  startKubeDouble,
  startKubelet,
  type KubeDouble,
  type Kubelet,
  type KubeDoubleOptions,
} from '../../src/index.js';

const run = promisify(execFile);

export const REAL_CLUSTER = process.env.KUBECONFIG !== undefined && process.env.KUBECONFIG !== '';

export const KUBECTL = process.env.KUBE_DOUBLE_KUBECTL ?? '/usr/bin/kubectl';

/** busybox as these tests use it: on the double its shell is the host's /bin/sh. */
export const BUSYBOX = 'busybox:1.36';

export interface Cluster {
  kubeconfig: string;
  /** Present only against the double. */
  double?: KubeDouble;
  kubelet?: Kubelet;
  dir: string;
  kubectl(
    args: string[],
    options?: { input?: string; kubeconfig?: string },
  ): Promise<KubectlResult>;
  close(): Promise<void>;
}

export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

export async function startCluster(
  options: KubeDoubleOptions & { kubelet?: boolean } = {},
): Promise<Cluster> {
  const dir = mkdtempSync(join(tmpdir(), 'kube-double-test-'));
  // kubectl here is a dispatcher that caches the server's version: each test run keeps its own cache.
  const cacheDir = join(dir, 'kubectl-cache');
  let double: KubeDouble | undefined;
  let kubelet: Kubelet | undefined;
  let kubeconfig: string;
  if (REAL_CLUSTER) {
    kubeconfig = process.env.KUBECONFIG ?? '';
  } else {
    double = await startKubeDouble(options);
    kubeconfig = double.kubeconfig(dir);
    if (options.kubelet !== false) {
      kubelet = startKubelet({
        double,
        nodeName: 'node-1',
        workRoot: join(dir, 'pods'),
        imageMap: { [BUSYBOX]: { entrypoint: ['sh'] } },
      });
    }
  }
  const kubectl = async (args: string[], opts: { input?: string; kubeconfig?: string } = {}) => {
    const child = run(KUBECTL, ['--cache-dir', cacheDir, ...args], {
      env: { ...process.env, KUBECONFIG: opts.kubeconfig ?? kubeconfig },
      timeout: 60_000,
    });
    if (opts.input !== undefined) {
      child.child.stdin?.end(opts.input);
    }
    try {
      const { stdout, stderr } = await child;
      return { code: 0, stdout, stderr };
    } catch (error) {
      const failure = error as { code?: number; stdout?: string; stderr?: string };
      return {
        code: typeof failure.code === 'number' ? failure.code : 1,
        stdout: failure.stdout ?? '',
        stderr: failure.stderr ?? '',
      };
    }
  };
  return {
    kubeconfig,
    double,
    kubelet,
    dir,
    kubectl,
    close: async () => {
      await kubelet?.stop();
      await double?.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A namespace name unique to this run, so a real cluster can host several runs. */
export function uniqueNamespace(prefix: string): string {
  return `${prefix}-${Math.random().toString(36).slice(2, 8)}`;
}
