/**
 * Warm pools end to end with the REAL worker: the pool's pod runs the built agent bundle
 * (LEOFLOW_WARM_WORKER=1) in the kubelet simulator, exchanges its projected token once through
 * the apiserver — the double, and Kubernetes' own kube-apiserver, in a namespace enforcing Pod
 * Security `baseline` (executor/kubernetes/pod-security-admission.test.ts) — and runs a chain of two attempts on the same pod — the downstream waits
 * for the worker that is still cleaning up after the upstream — so no attempt pod is created and
 * one TokenReview is sent in all. Between the attempts the worker kills what the first one left
 * behind: a detached `sleep` started by task 1 is dead before task 2 runs, and a canary Variable
 * only task 2 declares reaches neither task 1, the pod object nor the logs.
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dagSpecHash, isActive } from '@leoflow/core';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WarmPoolConfig } from '../../../src/config/warm-pool-config.js';
import { startControlPlane, type ControlPlane } from '../../../src/boot/control-plane.js';
import { IDENTITY_ANNOTATION } from '../../../src/executor/kubernetes/labels.js';
import { WORKER_POOL_ANNOTATION } from '../../../src/executor/kubernetes/exchange/reviewed-pod.js';
import { warmPoolKey } from '../../../src/executor/warm-pools/pool-manager.js';
import { exchangePlaneConfig } from '../../support/exchange-plane-config.js';
import {
  API_SERVER_KINDS,
  BASELINE,
  startKubeTestCluster,
  type KubeTestCluster,
} from '../../support/kube-cluster.js';
import { tokenReviewsCounted, waitFor as waitUntil } from '../../support/observe.js';
import { spec, task } from '../../support/spec-builders.js';

const NAMESPACE = 'warm-tasks';
const SA = 'leoflow-task';
const IMAGE = 'leoflow-agent:warm-kubelet';
const CANARY = 'canary-warm-7f3c9a1e5b';
const POOL: WarmPoolConfig = {
  tenant: 'default',
  namespace: NAMESPACE,
  serviceAccount: SA,
  image: IMAGE,
  minIdle: 1,
  maxSize: 1,
  maxAttemptsPerWorker: 10,
  maxWorkerLifetimeMs: 3_600_000,
  idleTtlMs: 300_000,
};

describe.each(API_SERVER_KINDS)(
  'a warm pool pod running the real worker (%s apiserver, kubelet simulator)',
  (kind) => {
    let cluster: KubeTestCluster;
    let shared: string;
    let cp: ControlPlane;
    const logs: string[] = [];

    beforeAll(async () => {
      // Where the tasks (each under its own attempt uid) leave their notes for the test.
      shared = mkdtempSync(join(tmpdir(), 'leoflow-warm-kubelet-notes-'));
      chmodSync(shared, 0o777);
      cluster = await startKubeTestCluster({
        kind,
        prefix: 'leoflow-warm-kubelet-',
        namespaces: { [NAMESPACE]: [SA] },
        // the default pool pod runs as root with the attempt-uid capabilities: Pod Security baseline
        namespaceLabels: BASELINE,
        // the notes dir is the operator's writable path: the sweep between attempts keeps it
        kubelet: {
          nodeName: 'node-warm',
          agentImages: [IMAGE],
          env: { LEOFLOW_SANDBOX_WRITABLE_PATHS: shared },
        },
      });
      const cfg = exchangePlaneConfig({
        dir: cluster.dir,
        kubeconfig: cluster.kubeconfig,
        image: IMAGE,
        images: [IMAGE],
        instance: 'warm-kubelet',
        tenants: { default: NAMESPACE },
        serviceAccount: SA,
        warmPools: { pools: [POOL], reconcileIntervalMs: 200 },
      });
      cfg.credentials.secretLivenessMode = 'enforce';
      // Undeclared secrets are refused (the default, permissive, would deliver them, audited).
      cfg.credentials.secretScoping = 'enforce';
      cp = await startControlPlane(cfg, {
        logger: pino({ level: 'debug' }, { write: (line: string) => void logs.push(line) }),
      });
      const adminToken = readFileSync(cp.adminTokenFile, 'utf8').trim();
      const put = await fetch(`${cp.httpUrl}/api/v1/variables/warm_canary`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ value: CANARY, secret: true }),
      });
      expect(put.status).toBe(200);
    }, 60_000);

    afterAll(async () => {
      await cp?.close();
      await cluster?.stop();
      rmSync(shared, { recursive: true, force: true });
    }, 60_000);

    const waitFor = <T>(what: string, probe: () => T | undefined | Promise<T | undefined>) =>
      waitUntil(what, probe, 45_000);

    type Pod = {
      metadata: { name: string; annotations?: Record<string, string> };
      status?: { phase?: string };
    };
    const pods = async () => (await cluster.pods(NAMESPACE)) as unknown as Pod[];

    it('runs a chain on one pod, kills what the first attempt left behind, one TokenReview in all', async () => {
      const poolLabels = { [WORKER_POOL_ANNOTATION]: warmPoolKey(POOL) };
      await waitFor('the pool worker to wait for work', () =>
        cp.warmPools?.broker.hasFreeWorkerFor('default', poolLabels) ? true : undefined,
      );
      const pidFile = join(shared, 'leftover.pid');
      // A process is left behind only if it still runs: a killed one may linger as a zombie until
      // whoever inherited it reaps it, and kill -0 succeeds on a zombie.
      const alive = (pid: string) =>
        `s=$(awk '{print $3}' /proc/${pid}/stat 2>/dev/null); if [ -n "$s" ] && [ "$s" != Z ]; then echo leftover-alive; else echo leftover-gone; fi`;
      // A chain: the downstream is dispatched the moment the upstream reports, while the one
      // worker is still cleaning up after it; it waits for that worker rather than going cold.
      const s = spec({
        dag_id: 'warm_chain',
        tasks: [
          task('first', {
            // A process meant to outlive its attempt: its own session, detached from the task.
            command: `setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! > ${pidFile}; env > ${shared}/first.env; id -u > ${shared}/first.uid`,
          }),
          task('second', {
            depends_on: ['first'],
            variables: ['warm_canary'],
            command: `${alive(`$(cat ${pidFile})`)}; id -u > ${shared}/second.uid; test "$AIRFLOW_VAR_WARM_CANARY" = ${CANARY} && echo canary-delivered`,
          }),
        ],
      });
      await cp.store.putDagVersion('default', s, dagSpecHash(s), Date.now());
      const run = await cp.runs.trigger('default', s.dag_id, {});
      for (const id of ['first', 'second']) {
        const row = await waitFor(`${id} to end`, async () => {
          const r = (await cp.store.getTaskInstance(run.id, id))!;
          return !isActive(r.state) && r.state !== 'scheduled' && r.state !== 'none'
            ? r
            : undefined;
        });
        expect([id, row.state, row.exit_code]).toEqual([id, 'success', 0]);
      }
      const out = (await cp.store.readLogs(run.id, 'second', 1, 0, 200)).map((l) => l.message);
      expect(out, out.join('\n')).toContain('leftover-gone');
      expect(out).toContain('canary-delivered');

      // One pod in all, the pool's: no attempt pod was created, and it exchanged once.
      const all = await pods();
      expect(all.map((p) => p.metadata.annotations?.[IDENTITY_ANNOTATION])).toEqual([undefined]);
      expect(all[0]?.metadata.annotations?.[WORKER_POOL_ANNOTATION]).toBe(warmPoolKey(POOL));
      expect(await tokenReviewsCounted(cp.metricsUrl)).toBe(1);

      // Each attempt ran under its own uid; the first one never saw the canary.
      const uid1 = readFileSync(join(shared, 'first.uid'), 'utf8').trim();
      const uid2 = readFileSync(join(shared, 'second.uid'), 'utf8').trim();
      expect(uid1).not.toBe(uid2);
      expect(readFileSync(join(shared, 'first.env'), 'utf8')).not.toContain(CANARY);
      expect(JSON.stringify(all)).not.toContain(CANARY);
      expect(logs.join('\n')).not.toContain(CANARY);
    }, 90_000);
  },
);
