/**
 * The executor contract against the Kubernetes executor, with @kubernetes/client-node talking
 * over HTTPS to the kube-apiserver double and its kubelet simulator running each pod's agent as
 * a local process (packages/kube-double). What only a real cluster proves (image pulls, PSA
 * admission, NetworkPolicy, a real kubelet's env handling) is listed in docs/kubernetes.md.
 */
import { pino } from 'pino';
import { afterAll, beforeAll, expect } from 'vitest';
import type { KubernetesExecutorConfig, ServerConfig } from '../../src/config/server-config.js';
import { KubernetesExecutor } from '../../src/executor/kubernetes/kubernetes-executor.js';
import { LABEL } from '../../src/executor/kubernetes/labels.js';
import { AGENT_TOKEN_ENV } from '../../src/executor/kubernetes/token-transport.js';
import type { TaskInstanceRow } from '../../src/store/types.js';
import { startKubeTestCluster, type KubeTestCluster } from '../support/kube-cluster.js';
import { executorContract, type ContractSubject, type Exposure } from './contract.js';
import { alive, filesBelow, processTree, readOr, taskStarted } from './host-exposure.js';

const NAMESPACE = 'leoflow-tasks';
const AGENT_IMAGE = 'leoflow-agent:contract';
const POD_SITE = 'the Pod env value LEOFLOW_AGENT_TOKEN';
const POD_REST_SITE = 'the rest of the Pod object';
const ENV_SITE = "the agent container's initial environment";

let cluster: KubeTestCluster;

beforeAll(async () => {
  cluster = await startKubeTestCluster({
    prefix: 'leoflow-kube-contract-',
    namespaces: { [NAMESPACE]: ['leoflow-task'] },
    kubelet: { agentImages: [AGENT_IMAGE] },
  });
}, 60_000);

afterAll(async () => {
  await cluster?.stop();
}, 60_000);

function kubernetesConfig(): KubernetesExecutorConfig {
  return {
    kubeconfig: cluster.kubeconfig,
    agentImage: AGENT_IMAGE,
    agentUrl: null,
    podStartTimeoutMs: 30_000,
    instance: 'contract',
    runAsUser: 65532,
    terminationGracePeriodSeconds: 5,
    agentCaConfigMap: null,
    keepFinishedPods: false,
    tenants: {
      default: {
        namespace: NAMESPACE,
        images: [],
        serviceAccounts: ['leoflow-task'],
        maxResources: { cpu: '1', memory: '1Gi' },
        defaultResources: {},
      },
    },
  };
}

/** The pods of an attempt as the apiserver double stores them. */
function podsOf(ti: TaskInstanceRow): Record<string, unknown>[] {
  return (
    cluster.double.store.list(cluster.double.api.type('', 'pods')) as Record<string, unknown>[]
  ).filter(
    (p) =>
      (p.metadata as { labels?: Record<string, string> }).labels?.[LABEL.taskInstance] === ti.id,
  );
}

const kubernetes: ContractSubject = {
  kind: 'kubernetes',
  credentialSites: [POD_SITE, ENV_SITE],
  configure: (cfg: ServerConfig) => {
    cfg.kubernetes = kubernetesConfig();
    cfg.defaultExecutor = 'kubernetes';
  },
  fresh: (cp, cfg) =>
    new KubernetesExecutor({
      config: cfg.kubernetes!,
      logger: pino({ level: 'silent' }),
      attemptLive: async (id) => {
        const row = await cp.store.getTaskInstanceById(id.task_instance_id);
        return row?.try_number === id.try_number && row.dispatch_gen === id.dispatch_gen;
      },
    }),
  exposure: async (_cp, ti) => {
    // The agent registers before it starts the task: wait for the task's process, so its
    // environment is really read.
    for (let i = 0; i < 100 && !taskStarted(ti.pid!); i++)
      await new Promise((r) => setTimeout(r, 50));
    const seen: Exposure[] = [];
    for (const pod of podsOf(ti)) {
      // The transport's one env value, and the whole Pod without it: a token anywhere else on
      // the Pod (an annotation, another env var, a label) is not where the transport says.
      const rest = structuredClone(pod) as {
        spec: { containers: { env?: { name: string; value?: string }[] }[] };
      };
      for (const c of rest.spec.containers) {
        for (const e of c.env ?? []) {
          if (e.name === AGENT_TOKEN_ENV) {
            seen.push({ site: POD_SITE, text: e.value ?? '' });
            e.value = '';
          }
        }
      }
      seen.push({ site: POD_REST_SITE, text: JSON.stringify(rest) });
    }
    // Every other object in the namespace (secrets, configmaps, service accounts, events).
    for (const type of ['secrets', 'configmaps', 'serviceaccounts', 'events']) {
      try {
        for (const o of cluster.double.store.list(cluster.double.api.type('', type)))
          seen.push({ site: `${type} in the cluster`, text: JSON.stringify(o) });
      } catch {
        // a kind the double does not serve
      }
    }
    const [agent, ...below] = processTree(ti.pid!);
    seen.push(
      { site: ENV_SITE, text: readOr(`/proc/${agent}/environ`) },
      { site: 'agent argv', text: readOr(`/proc/${agent}/cmdline`) },
    );
    for (const pid of below) {
      seen.push(
        { site: `task process ${pid} environ`, text: readOr(`/proc/${pid}/environ`) },
        { site: `task process ${pid} argv`, text: readOr(`/proc/${pid}/cmdline`) },
      );
    }
    // The pod's directory on the node: its volumes, work dir and container logs.
    for (const text of filesBelow(cluster.kubeletRoot))
      seen.push({ site: 'files on the node', text });
    expect(below.length, 'the task process is running').toBeGreaterThan(0);
    return seen.filter((e) => e.text !== '');
  },
  killAgent: (_cp, ti) => {
    process.kill(ti.pid!, 'SIGKILL');
    return Promise.resolve();
  },
  watchAttempt: (_cp, ti) => {
    const tree = processTree(ti.pid!);
    return Promise.resolve({
      // Nothing left: no process of the pod, and the pod itself garbage-collected.
      gone: () => Promise.resolve(tree.every((pid) => !alive(pid)) && podsOf(ti).length === 0),
    });
  },
};

executorContract(kubernetes);
