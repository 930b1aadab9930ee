/**
 * The SecretKeyRef fallback end to end (auth.agent_token_transport=exchange,
 * auth.exchange_bootstrap=secret_key_ref) through an apiserver — the double, and Kubernetes' own
 * kube-apiserver — and the kubelet simulator, which resolves valueFrom.secretKeyRef from the pod's
 * bootstrap Secret (on the real apiserver as the node, which the Node authorizer lets read only
 * the Secrets of pods bound to it), in a namespace enforcing Pod Security `restricted`: the agent exchanges the
 * value, the task runs and succeeds without the value or its variable in its env, the Secret is
 * gone, the value no longer exchanges, and no TokenReview was sent.
 */
import { isActive, dagSpecHash } from '@leoflow/core';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startControlPlane, type ControlPlane } from '../../../../src/boot/control-plane.js';
import { create } from '@bufbuild/protobuf';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import {
  AgentService,
  BootstrapCredentialKind,
  ExchangeTokenRequestSchema,
} from '@leoflow/protocol';
import {
  BOOTSTRAP_SECRET_KEY,
  EXCHANGE_BOOTSTRAP_ENV,
} from '../../../../src/executor/kubernetes/exchange/bootstrap-secret.js';
import { LABEL } from '../../../../src/executor/kubernetes/labels.js';
import { EXCHANGE_TOKEN_VOLUME } from '../../../../src/executor/kubernetes/projected-token.js';
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
const AGENT_IMAGE = 'leoflow-agent:skr';

describe.each(API_SERVER_KINDS)(
  'a secret_key_ref attempt through the %s apiserver and the kubelet simulator',
  (kind) => {
    let cluster: KubeTestCluster;
    let cp: ControlPlane;
    const values = new Set<string>();
    const logLines: string[] = [];
    let stopWatch: () => void = () => undefined;

    beforeAll(async () => {
      cluster = await startKubeTestCluster({
        kind,
        prefix: 'leoflow-secret-bootstrap-e2e-',
        namespaces: { [NAMESPACE]: ['leoflow-task'] },
        namespaceLabels: RESTRICTED,
        kubelet: { agentImages: [AGENT_IMAGE] },
      });
      // every bootstrap value as created (the exchange deletes its Secret), for the canaries
      const watch = cluster.api.watch(
        `/api/v1/namespaces/${NAMESPACE}/secrets`,
        (_type, object) => {
          const data = (object as { data?: Record<string, string> }).data;
          if (data?.[BOOTSTRAP_SECRET_KEY]) {
            values.add(Buffer.from(data[BOOTSTRAP_SECRET_KEY], 'base64').toString('utf8'));
          }
        },
      );
      stopWatch = () => watch.stop();
      await watch.ready;
      const cfg = exchangePlaneConfig({
        dir: cluster.dir,
        kubeconfig: cluster.kubeconfig,
        image: AGENT_IMAGE,
        instance: 'skr',
        tenants: { default: NAMESPACE },
        serviceAccount: 'leoflow-task',
      });
      cfg.credentials.exchangeBootstrap = 'secret_key_ref';
      cp = await startControlPlane(cfg, {
        logger: pino({ level: 'debug' }, { write: (line: string) => void logLines.push(line) }),
      });
    }, 60_000);

    afterAll(async () => {
      stopWatch();
      await cp?.close();
      await cluster?.stop();
    }, 60_000);

    it('runs and succeeds; the value reaches neither the Pod, the task env, a log nor a second exchange', async () => {
      const s = spec({
        dag_id: 'skr_e2e',
        tasks: [task('work', { command: 'env; echo skr-ran' })],
      });
      await cp.store.putDagVersion('default', s, dagSpecHash(s), Date.now());
      const run = await cp.runs.trigger('default', s.dag_id, {});
      const row = await waitFor('the attempt to end', async () => {
        const r = (await cp.store.getTaskInstance(run.id, 'work'))!;
        return !isActive(r.state) && r.state !== 'scheduled' && r.state !== 'none' ? r : undefined;
      });
      const logs = (await cp.store.readLogs(run.id, 'work', 1, 0, 1000)).map((l) => l.message);
      expect([row.state, row.exit_code]).toEqual(['success', 0]);
      expect(logs).toContain('skr-ran');
      expect(values.size).toBe(1);
      const [value] = [...values] as [string];
      // the task's env (printed by `env`): neither the variable nor its value
      const taskOutput = logs.join('\n');
      expect(taskOutput).toContain('HOME=');
      expect(taskOutput).not.toContain(EXCHANGE_BOOTSTRAP_ENV);
      expect(taskOutput).not.toContain(value);
      // the Pod as stored: a secretKeyRef, no projected token, no value
      const pods = ((await cluster.pods()) as Record<string, unknown>[]).filter(
        (p) =>
          (p.metadata as { labels?: Record<string, string> }).labels?.[LABEL.instance] === 'skr',
      );
      expect(pods).toHaveLength(1);
      const podText = JSON.stringify(pods[0]);
      expect(podText).not.toContain(value);
      expect(podText).not.toContain(EXCHANGE_TOKEN_VOLUME);
      expect(podText).toContain('secretKeyRef');
      // the Secret is gone (exchanged, and the attempt ended), no control-plane log line holds it
      expect(
        (await cluster.api.list(`/api/v1/namespaces/${NAMESPACE}/secrets`)).filter((x) =>
          x.metadata.name?.endsWith('-bootstrap'),
        ),
      ).toEqual([]);
      expect(logLines.join('\n')).not.toContain(value);
      // a value read from the agent's initial environment later is dead: it exchanges no more
      const client = createClient(AgentService, createGrpcTransport({ baseUrl: cp.agentUrl }));
      await expect(
        client.exchangeToken(
          create(ExchangeTokenRequestSchema, {
            kind: BootstrapCredentialKind.BOOTSTRAP_SECRET,
            credential: value,
            protocolVersion: 1,
          }),
        ),
      ).rejects.toMatchObject({ rawMessage: expect.not.stringContaining(value) });
      expect(await tokenReviewsCounted(cp.metricsUrl)).toBe(0);
    }, 90_000);
  },
);
