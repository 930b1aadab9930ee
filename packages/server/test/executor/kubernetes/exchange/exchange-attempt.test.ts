/**
 * An attempt under auth.agent_token_transport=exchange, end to end through an apiserver — the
 * double, and Kubernetes' own kube-apiserver — and the kubelet simulator: the Pod carries no
 * Leoflow credential (only a projected service-account token volume, which the kubelet requests
 * through TokenRequest bound to the pod), the agent's first call exchanges it (one TokenReview,
 * the bound-pod extras, the pod's identity annotation), the minted task token carries every later
 * RPC (logs, heartbeats, the outcome), the task succeeds, and the control plane sent exactly one
 * TokenReview per pod (leoflow_token_reviews_total). The tenant namespace enforces Pod Security
 * `restricted`, so each attempt pod was admitted by the PodSecurity plugin.
 */
import { isActive, dagSpecHash } from '@leoflow/core';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startControlPlane, type ControlPlane } from '../../../../src/boot/control-plane.js';
import { LABEL } from '../../../../src/executor/kubernetes/labels.js';
import { AGENT_TOKEN_ENV } from '../../../../src/executor/kubernetes/token-transport.js';
import {
  EXCHANGE_TOKEN_FILE_ENV,
  EXCHANGE_TOKEN_VOLUME,
} from '../../../../src/executor/kubernetes/projected-token.js';
import { exchangePlaneConfig } from '../../../support/exchange-plane-config.js';
import {
  API_SERVER_KINDS,
  RESTRICTED,
  startKubeTestCluster,
  type KubeTestCluster,
} from '../../../support/kube-cluster.js';
import { tokenReviewsCounted, waitFor } from '../../../support/observe.js';
import { spec, task } from '../../../support/spec-builders.js';

const NAMESPACE = 'leoflow-tasks';
const AGENT_IMAGE = 'leoflow-agent:exchange';

describe.each(API_SERVER_KINDS)(
  'an exchange-mode attempt through the %s apiserver and the kubelet simulator',
  (kind) => {
    let cluster: KubeTestCluster;
    let cp: ControlPlane;

    beforeAll(async () => {
      cluster = await startKubeTestCluster({
        kind,
        prefix: 'leoflow-exchange-attempt-',
        namespaces: { [NAMESPACE]: ['leoflow-task'] },
        namespaceLabels: RESTRICTED,
        kubelet: { agentImages: [AGENT_IMAGE] },
      });
      const cfg = exchangePlaneConfig({
        dir: cluster.dir,
        kubeconfig: cluster.kubeconfig,
        image: AGENT_IMAGE,
        instance: 'exchange',
        tenants: { default: NAMESPACE },
        serviceAccount: 'leoflow-task',
      });
      cp = await startControlPlane(cfg, { logger: pino({ level: 'silent' }) });
    }, 60_000);

    afterAll(async () => {
      await cp?.close();
      await cluster?.stop();
    }, 60_000);

    it('runs and succeeds; its Pod carries no credential; one TokenReview per pod', async () => {
      const runs = [];
      for (let i = 0; i < 2; i++) {
        const s = spec({
          dag_id: `exchange_${i}`,
          tasks: [task('work', { command: `echo exchanged-${i}` })],
        });
        await cp.store.putDagVersion('default', s, dagSpecHash(s), Date.now());
        runs.push(await cp.runs.trigger('default', s.dag_id, {}));
      }
      for (const [i, run] of runs.entries()) {
        const row = await waitFor('the attempt to end', async () => {
          const r = (await cp.store.getTaskInstance(run.id, 'work'))!;
          return !isActive(r.state) && r.state !== 'scheduled' && r.state !== 'none'
            ? r
            : undefined;
        });
        expect([row.state, row.exit_code]).toEqual(['success', 0]);
        const logs = await cp.store.readLogs(run.id, 'work', 1, 0, 100);
        expect(logs.map((l) => l.message)).toContain(`exchanged-${i}`);
      }
      const pods = ((await cluster.pods()) as Record<string, unknown>[]).filter(
        (p) =>
          (p.metadata as { labels?: Record<string, string> }).labels?.[LABEL.executor] ===
          'kubernetes',
      );
      expect(pods).toHaveLength(2);
      for (const pod of pods) {
        const text = JSON.stringify(pod);
        // no Leoflow token anywhere on the Pod object: no env value, no JWT of any kind
        expect(text).not.toContain(AGENT_TOKEN_ENV);
        expect(text).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}\./);
        const p = pod as {
          spec: {
            volumes: {
              name: string;
              projected?: {
                sources: {
                  serviceAccountToken?: { audience: string; expirationSeconds: number };
                }[];
              };
            }[];
            containers: {
              env?: { name: string }[];
              volumeMounts?: { name: string; readOnly?: boolean }[];
            }[];
          };
        };
        const volume = p.spec.volumes.find((v) => v.name === EXCHANGE_TOKEN_VOLUME);
        expect(volume?.projected?.sources[0]?.serviceAccountToken).toEqual({
          audience: 'leoflow-control-plane',
          expirationSeconds: 600,
          path: 'token',
        });
        expect(
          p.spec.containers[0]?.volumeMounts?.find((m) => m.name === EXCHANGE_TOKEN_VOLUME)
            ?.readOnly,
        ).toBe(true);
        expect(p.spec.containers[0]?.env?.map((e) => e.name)).toContain(EXCHANGE_TOKEN_FILE_ENV);
      }
      expect(await tokenReviewsCounted(cp.metricsUrl)).toBe(pods.length);
      // the control plane's exchange recorded each attempt's pod in the shared store: another pod
      // of the same dispatch, on any replica, finds the attempt taken
      for (const run of runs) {
        const ti = (await cp.store.getTaskInstance(run.id, 'work'))!;
        const key = {
          tenant_id: ti.tenant_id,
          task_instance_id: ti.id,
          try_number: ti.try_number,
          dag_id: ti.dag_id,
          dag_run_id: run.id,
          run_id: run.run_id,
          task_id: 'work',
        };
        expect(await cp.store.bindExchangedPod(key, ti.dispatch_gen, 'another-pod', 0, 0)).toBe(
          'taken',
        );
      }
    }, 90_000);
  },
);
