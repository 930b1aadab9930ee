// Leoflow Pro on Kubernetes under the exchange transport, end to end, on the kube-apiserver double
// and on Kubernetes' own kube-apiserver: deploy/base with deploy/components/exchange applied by the
// real `kubectl apply -k` (the one cluster-scoped grant, create on tokenreviews, bound to the
// manifests' control-plane ServiceAccount — the control plane runs with that account's token, so
// its TokenReview passes real RBAC), a real `leoflow server` on PostgreSQL, and the kubelet
// simulator requesting each attempt pod's projected token from TokenRequest, bound to the pod.
// A task that declares a secret receives it; no Pod version the apiserver stored holds a Leoflow
// token; the projected token, read off the node while the attempt runs, is refused when replayed;
// every pod passed Pod Security `restricted`.
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import {
  AgentService,
  BootstrapCredentialKind,
  ExchangeTokenRequestSchema,
} from '@leoflow/protocol';
import pg from 'pg';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LABEL } from '../../packages/server/src/executor/kubernetes/labels.js';
import { EXCHANGE_TOKEN_DIR } from '../../packages/server/src/executor/kubernetes/projected-token.js';
import { API_SERVER_KINDS } from '../../packages/server/test/support/kube-cluster.js';
import { find, literalEnv, render } from '../support/manifests.js';
import { freshPostgresDatabase } from '../support/postgres-database.js';
import {
  adminToken,
  allFinished,
  startAgentService,
  startProKubernetes,
  startReplica,
  trigger,
  vaultKey,
  type ProKubernetes,
  type Replica,
} from '../support/pro-cluster.js';
import { cli, scratchDir, waitFor, writeDag } from '../support/processes.js';

const MANIFESTS = 'test/deploy/fixtures/exchange';

interface StoredPod {
  metadata: { name: string; namespace: string; labels?: Record<string, string> };
  spec: { volumes?: { name: string; projected?: unknown }[] };
  status?: { phase?: string };
}

describe.each(API_SERVER_KINDS)(
  'Leoflow Pro on Kubernetes with the exchange component (%s apiserver)',
  (kind) => {
    const CANARY = `CANARYexchange${randomBytes(6).toString('hex')}`;
    let scratch: { dir: string; cleanup: () => void };
    let marks: string;
    let db: { url: string; drop: () => Promise<void> };
    let client: pg.Client;
    let kube: ProKubernetes;
    let service: Awaited<ReturnType<typeof startAgentService>>;
    let replica: Replica;
    let token: string;
    let stopWatch: () => void = () => undefined;
    const podVersions: StoredPod[] = [];

    beforeAll(async () => {
      scratch = scratchDir('leoflow-pro-exchange-');
      marks = join(scratch.dir, 'marks');
      mkdirSync(marks, { mode: 0o777 });
      chmodSync(marks, 0o777);
      db = await freshPostgresDatabase('pro_exchange');
      client = new pg.Client({ connectionString: db.url });
      await client.connect();
      kube = await startProKubernetes({
        dir: join(scratch.dir, 'kube'),
        manifests: MANIFESTS,
        kind,
      });
      const watch = kube.api.watch(`/api/v1/namespaces/${kube.namespace}/pods`, (_type, object) => {
        podVersions.push(structuredClone(object) as unknown as StoredPod);
      });
      stopWatch = () => watch.stop();
      await watch.ready;
      service = await startAgentService(() => [replica.agentPort]);

      // What the component sets on both Deployments (the env layer over the shipped file), then
      // what differs on one machine: a kubeconfig with the manifests' control-plane token, the local
      // agent Service in cleartext, the overlay's namespace, scoping enforced.
      const env = literalEnv(find(render(MANIFESTS), 'Deployment', 'leoflow-api'));
      expect(env['LEOFLOW_AUTH_AGENT_TOKEN_TRANSPORT']).toBe('exchange');
      const cfg = structuredClone(kube.shippedConfig) as {
        auth: Record<string, string>;
        executor: {
          kubernetes: Record<string, unknown> & {
            tenants: Record<string, Record<string, unknown>>;
          };
        };
      };
      cfg.auth.agent_token_transport = env['LEOFLOW_AUTH_AGENT_TOKEN_TRANSPORT'] ?? '';
      cfg.auth.secret_scoping = 'enforce';
      Object.assign(cfg.executor.kubernetes, {
        kubeconfig: kube.controlPlaneKubeconfig,
        agent_url: service.url,
        agent_ca_config_map: null,
        termination_grace_period: 5,
      });
      cfg.executor.kubernetes.tenants['default']!['namespace'] = kube.namespace;
      writeFileSync(join(scratch.dir, 'config.yaml'), stringify(cfg));
      const dags = join(scratch.dir, 'dags');
      mkdirSync(dags, { recursive: true });
      replica = await startReplica({
        name: 'a',
        role: 'all',
        root: join(scratch.dir, 'replicas'),
        writablePaths: [scratch.dir],
        keysDir: join(scratch.dir, 'keys'),
        databaseUrl: db.url,
        agentServiceUrl: service.url,
        dagsFolder: dags,
        configFile: join(scratch.dir, 'config.yaml'),
        env: { LEOFLOW_SECRET_KEY: vaultKey() },
        lease: ['3s', '500ms', '1s'],
      });
      token = adminToken(join(scratch.dir, 'keys'));
      const as = { LEOFLOW_URL: replica.url, LEOFLOW_TOKEN: token };
      expect((await cli(['variables', 'set', 'canary', CANARY, '--secret'], as)).code).toBe(0);
      const dag = writeDag(
        join(scratch.dir, 'pushed'),
        'exchanged',
        `dag_id: exchanged
tasks:
  - task_id: declares
    variables: [canary]
    command: |
      printf %s "$AIRFLOW_VAR_CANARY" | sha256sum | cut -d' ' -f1 > "${marks}/\${AIRFLOW_CTX_DAG_RUN_ID}.tmp"
      mv "${marks}/\${AIRFLOW_CTX_DAG_RUN_ID}.tmp" "${marks}/\${AIRFLOW_CTX_DAG_RUN_ID}"
      sleep 4
`,
      );
      const pushed = await cli(['dags', 'push', dag], as);
      expect(pushed.code, pushed.stderr).toBe(0);
    }, 180_000);

    afterAll(async () => {
      stopWatch();
      await replica?.kill9();
      await kube?.close();
      await service?.close();
      await client?.end();
      await db?.drop();
      scratch?.cleanup();
    }, 60_000);

    it('the declaring task gets its secret through the exchanged token; no Pod holds a Leoflow token; the projected token replayed is refused', async () => {
      await trigger([replica], token, 'exchanged', 'run-0');
      // While the attempt runs: its projected token, as the kubelet wrote it on the node.
      const mark = join(marks, 'run-0');
      // Seen time out twice in full .ci/run runs on the real apiserver (never alone, nor beside
      // three busy loops); the failure carries what the next reader needs to find the race.
      await waitFor('the task to read its secret', async () =>
        existsSync(mark) ? true : undefined,
      ).catch((err: unknown) => {
        const pods = podVersions.map((p) => `${p.metadata.name}: ${p.status?.phase ?? '?'}`);
        const tail = replica.output().split('\n').slice(-40).join('\n');
        throw new Error(
          `${String(err)}\npod versions seen:\n${pods.join('\n')}\nthe replica's last lines:\n${tail}`,
        );
      });
      const pod = podVersions.find((p) => p.metadata.labels?.[LABEL.executor] === 'kubernetes');
      expect(pod).toBeDefined();
      const root = kube.kubelet.volumeRoot(kube.namespace, pod!.metadata.name);
      const projected = readFileSync(join(root!, EXCHANGE_TOKEN_DIR, 'token'), 'utf8');
      const claims = JSON.parse(Buffer.from(projected.split('.')[1]!, 'base64url').toString()) as {
        aud: string[];
        'kubernetes.io': { pod: { name: string } };
      };
      expect(claims.aud).toEqual(['leoflow-control-plane']);
      expect(claims['kubernetes.io'].pod.name).toBe(pod!.metadata.name);
      const agent = createClient(AgentService, createGrpcTransport({ baseUrl: service.url }));
      const replay = await agent
        .exchangeToken(
          create(ExchangeTokenRequestSchema, {
            kind: BootstrapCredentialKind.PROJECTED_SERVICE_ACCOUNT_TOKEN,
            credential: projected,
            protocolVersion: 1,
          }),
        )
        .then(
          () => 'exchanged',
          (err: unknown) => (err instanceof ConnectError ? Code[err.code] : String(err)),
        );
      expect(replay).toBe('PermissionDenied');

      const done = await waitFor(
        'the run to finish',
        () => allFinished(client, 'exchanged', 1),
        60_000,
      );
      expect([...done.values()]).toEqual(['success']);
      expect(readFileSync(mark, 'utf8').trim()).toBe(
        createHash('sha256').update(CANARY).digest('hex'),
      );
      const { rows } = await client.query<{ v: string | null }>(
        `select variables_delivered as v from attempt_records where dag_id = 'exchanged'`,
      );
      expect(rows.map((r) => r.v)).toEqual([expect.stringContaining('canary')]);

      // Every stored version of the attempt pod: the projected volume, no Leoflow token, no canary.
      const attemptPods = podVersions.filter(
        (p) => p.metadata.labels?.[LABEL.executor] === 'kubernetes',
      );
      expect(attemptPods.length).toBeGreaterThan(0);
      for (const version of attemptPods) {
        const text = JSON.stringify(version);
        expect(text).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}\./);
        expect(text).not.toContain('LEOFLOW_AGENT_TOKEN');
        expect(text).not.toContain(CANARY);
        expect(version.spec.volumes?.some((v) => v.projected !== undefined)).toBe(true);
      }
      expect(replica.output()).not.toContain(CANARY);
    }, 120_000);
  },
);
