import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createClient, Code, ConnectError } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { AgentService } from '@leoflow/protocol';
import pg from 'pg';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { filesBelow } from '../../packages/server/test/executor/host-exposure.js';
import { LABEL } from '../../packages/server/src/executor/kubernetes/labels.js';
import { AGENT_TOKEN_ENV } from '../../packages/server/src/executor/kubernetes/token-transport.js';
import { API_SERVER_KINDS } from '../../packages/server/test/support/kube-cluster.js';
import { freshPostgresDatabase } from '../support/postgres-database.js';
import {
  adminToken,
  allFinished,
  executions,
  leaderOf,
  markingTask,
  overlapping,
  startAgentService,
  startProKubernetes,
  startReplica,
  trigger,
  vaultKey,
  type ProKubernetes,
  type Replica,
} from '../support/pro-cluster.js';
import { REPO, cli, scratchDir, waitFor, writeDag } from '../support/processes.js';

// Leoflow Pro on Kubernetes, end to end, once on the kube-apiserver double and once on
// Kubernetes' own kube-apiserver (with its controller manager and scheduler): PostgreSQL, two
// `leoflow server` replicas configured by the config file deploy/base ships, deploy/base applied
// by the real `kubectl apply -k` in a namespace enforcing Pod Security `restricted`, and the
// kubelet simulator running every attempt's pod (its agent is the built agent). The control plane
// reaches the apiserver with a token of the manifests' leoflow-control-plane service account, so
// every pod it creates, watches or deletes passes through the manifests' Role.

const CANARY_VAR = `CANARYvar${randomBytes(6).toString('hex')}`;
const CANARY_PW = `CANARYpw${randomBytes(6).toString('hex')}`;
const CANARIES = [CANARY_VAR, CANARY_PW];
const WAREHOUSE_URI = `postgres://report:${CANARY_PW}@db.internal:5432/warehouse`;

interface PodVersion {
  type: string;
  pod: {
    metadata: { name: string; uid: string; namespace: string; labels: Record<string, string> };
    spec: {
      serviceAccountName?: string;
      automountServiceAccountToken?: boolean;
      containers: { env?: { name: string; value?: string }[] }[];
    };
    status?: { phase?: string };
  };
}

describe.each(API_SERVER_KINDS)('Leoflow Pro on Kubernetes (%s apiserver)', (kind) => {
  let scratch: { dir: string; cleanup: () => void };
  let marks: string;
  let db: { url: string; drop: () => Promise<void> };
  let client: pg.Client;
  let kube: ProKubernetes;
  let stopPodWatch: () => void = () => undefined;
  let service: Awaited<ReturnType<typeof startAgentService>>;
  const replicas = new Map<string, Replica>();
  let token: string;
  /** Every version of every pod the apiserver stored, as an audit sink that logs pod specs would. */
  const podLog: PodVersion[] = [];
  /** Every API response body this test read (checked for canaries at the end). */
  const responses: string[] = [];

  const sha = (s: string) => createHash('sha256').update(s).digest('hex');

  function apiReplicas(): Replica[] {
    return [...replicas.values()].filter(
      (r) => r.proc.exitCode === null && r.proc.signalCode === null,
    );
  }

  async function get<T>(path: string): Promise<T> {
    for (const r of apiReplicas()) {
      const res = await fetch(`${r.url}${path}`, { headers: { authorization: `Bearer ${token}` } });
      const text = await res.text();
      responses.push(text);
      if (res.ok) return JSON.parse(text) as T;
    }
    throw new Error(`GET ${path} failed on every replica`);
  }

  async function leoflow(args: string[]) {
    const res = await cli(args, { LEOFLOW_URL: apiReplicas()[0]!.url, LEOFLOW_TOKEN: token });
    responses.push(res.stdout, res.stderr);
    return res;
  }

  /** The pods of a task (all dispatches), by uid, from the apiserver's history. */
  function podsOfTask(dag: string, runId: string, task: string): Map<string, PodVersion[]> {
    const out = new Map<string, PodVersion[]>();
    for (const v of podLog) {
      const l = v.pod.metadata.labels;
      if (l[LABEL.dag] === dag && l[LABEL.run] === runId && l[LABEL.task] === task)
        out.set(v.pod.metadata.uid, [...(out.get(v.pod.metadata.uid) ?? []), v]);
    }
    return out;
  }

  function envToken(v: PodVersion): string | undefined {
    return v.pod.spec.containers[0]?.env?.find((e) => e.name === AGENT_TOKEN_ENV)?.value;
  }

  /** The agent RPC as a thief holding a token would call it: through the agent Service, no session. */
  function replayWith(stolen: string) {
    return createClient(
      AgentService,
      createGrpcTransport({
        baseUrl: service.url,
        interceptors: [
          (next) => (req) => {
            req.header.set('authorization', `Bearer ${stolen}`);
            return next(req);
          },
        ],
      }),
    );
  }

  async function refusal(call: Promise<unknown>): Promise<string> {
    try {
      await call;
      return 'ok';
    } catch (err) {
      return err instanceof ConnectError ? Code[err.code] : String(err);
    }
  }

  async function start(name: string): Promise<Replica> {
    const r = await startReplica({
      name,
      role: 'all',
      root: join(scratch.dir, 'replicas'),
      writablePaths: [scratch.dir],
      keysDir: join(scratch.dir, 'keys'),
      databaseUrl: db.url,
      agentServiceUrl: service.url,
      dagsFolder: join(scratch.dir, 'dags'),
      configFile: join(scratch.dir, 'config.yaml'),
      env: { LEOFLOW_SECRET_KEY: key },
      lease: ['3s', '500ms', '1s'],
    });
    replicas.set(name, r);
    return r;
  }
  const key = vaultKey();

  beforeAll(async () => {
    scratch = scratchDir('leoflow-pro-kube-');
    marks = join(scratch.dir, 'marks');
    mkdirSync(marks, { mode: 0o777 });
    chmodSync(marks, 0o777);
    db = await freshPostgresDatabase('pro_kube');
    client = new pg.Client({ connectionString: db.url });
    await client.connect();
    kube = await startProKubernetes({
      dir: join(scratch.dir, 'kube'),
      manifests: 'deploy/base',
      kind,
    });
    // Every version of every attempt pod (the executor's: on the real apiserver the manifests'
    // Deployments have pods of their own, which the node cannot pull an image for).
    const podWatch = kube.api.watch('/api/v1/pods', (type, object) => {
      const pod = object as unknown as PodVersion['pod'];
      if (pod.metadata.labels?.[LABEL.executor] === 'kubernetes')
        podLog.push({ type, pod: structuredClone(pod) });
    });
    stopPodWatch = () => podWatch.stop();
    await podWatch.ready;
    service = await startAgentService(() => apiReplicas().map((r) => r.agentPort));

    // The configuration the manifests ship, with what differs on one machine: the apiserver is
    // reached through a kubeconfig (not in-cluster), pods dial the local agent Service in
    // cleartext (loopback; no CA to mount). Scoping and liveness are enforced as the manifests
    // ship them (issue 34).
    const cfg = structuredClone(kube.shippedConfig) as {
      auth: Record<string, string>;
      executor: { kubernetes: Record<string, unknown> };
    };
    expect(cfg.auth.secret_liveness_mode).toBe('enforce');
    expect(cfg.auth.secret_scoping).toBe('enforce');
    Object.assign(cfg.executor.kubernetes, {
      kubeconfig: kube.controlPlaneKubeconfig,
      agent_url: service.url,
      agent_ca_config_map: null,
      termination_grace_period: 5,
    });
    writeFileSync(join(scratch.dir, 'config.yaml'), stringify(cfg));

    const dags = join(scratch.dir, 'dags');
    writeDag(dags, 'hello', readFileSync(join(REPO, 'examples/dags/hello/leoflow.yaml'), 'utf8'));
    writeDag(
      dags,
      'chain',
      `dag_id: chain\ntasks:\n${markingTask(marks, 't1')}${markingTask(marks, 't2', ['t1'])}${markingTask(marks, 't3', ['t2'])}`,
    );
    await start('a');
    token = adminToken(join(scratch.dir, 'keys'));
    await start('b');

    // Declared names must exist when a DAG registers: the vault first, then the DAG.
    expect((await leoflow(['variables', 'set', 'canary_var', CANARY_VAR, '--secret'])).code).toBe(
      0,
    );
    expect((await leoflow(['connections', 'set', 'warehouse', '--uri', WAREHOUSE_URI])).code).toBe(
      0,
    );
    // The task reports only hashes and names: it must not print a secret itself.
    const secrets = writeDag(
      join(scratch.dir, 'pushed'),
      'secrets',
      `dag_id: secrets
tasks:
  - task_id: declares
    variables: [canary_var]
    connections: [warehouse]
    command: |
      f="${marks}/secrets__\${AIRFLOW_CTX_DAG_RUN_ID}__declares"
      printf %s "$AIRFLOW_VAR_CANARY_VAR" | sha256sum | cut -d' ' -f1 > "$f.tmp"
      printf %s "$AIRFLOW_CONN_WAREHOUSE" | sha256sum | cut -d' ' -f1 >> "$f.tmp"
      mv "$f.tmp" "$f"
      sleep 3
  - task_id: other
    command: |
      env | cut -d= -f1 | grep -E '^(AIRFLOW_VAR_|AIRFLOW_CONN_|LEOFLOW_AGENT_TOKEN)' > "${marks}/secrets__\${AIRFLOW_CTX_DAG_RUN_ID}__other" || true
`,
    );
    const pushed = await leoflow(['dags', 'push', secrets]);
    expect(pushed.code, pushed.stderr).toBe(0);
  }, 120_000);

  afterAll(async () => {
    for (const r of replicas.values()) await r.kill9();
    stopPodWatch();
    await kube?.close();
    await service?.close();
    await client?.end();
    await db?.drop();
    scratch?.cleanup();
  }, 60_000);

  describe('the real kubectl, deploy/base', () => {
    it("the control plane's service-account token holds exactly the manifests' Role: pods in its namespace, nothing elsewhere", async () => {
      const can = (...args: string[]) =>
        kube
          .kubectl(['auth', 'can-i', ...args], kube.controlPlaneKubeconfig)
          .then((out) => out.trim())
          .catch((err: { stdout?: string }) => String(err.stdout).trim());
      expect(await can('create', 'pods', '-n', kube.namespace)).toBe('yes');
      expect(await can('watch', 'pods', '-n', kube.namespace)).toBe('yes');
      expect(await can('create', 'pods', '-n', 'default')).toBe('no');
      expect(await can('list', 'secrets', '-n', kube.namespace)).toBe('no');
      expect(await can('create', 'serviceaccounts/token', '-n', kube.namespace)).toBe('no');
    });

    it('runs DAGs as pods; kill -9 of the leader mid-run: the other takes over, every run completes, no task instance has two attempts at once, no pod is left', async () => {
      await trigger(apiReplicas(), token, 'hello', 'hello-0');
      for (let i = 0; i < 3; i++) await trigger(apiReplicas(), token, 'chain', `chain-${i}`);
      // Mid-run: some attempt's pod is running its task when the leader dies.
      await waitFor('a chain task to be running in its pod', async () =>
        executions(marks).some((e) => e.end === null) ? true : undefined,
      );
      const leader = await waitFor('a leader', () => leaderOf(apiReplicas()), 20_000);
      const other = [...replicas.values()].find((r) => r !== leader)!;
      await leader.kill9();
      const killedAt = Date.now();
      await waitFor('the takeover', async () => ((await other.leads()) ? true : undefined), 20_000);
      const takeoverMs = Date.now() - killedAt;
      await trigger(apiReplicas(), token, 'chain', 'chain-3');

      const chains = await waitFor(
        'every chain run to finish',
        () => allFinished(client, 'chain', 4),
        90_000,
      );
      expect([...chains.values()]).toEqual(['success', 'success', 'success', 'success']);
      expect([...(await waitFor('hello', () => allFinished(client, 'hello', 1))).values()]).toEqual(
        ['success'],
      );

      // Every chain task ran once, never beside itself: its execution marks, its attempt records
      // (one try each) and its pods (one each: no twin was started by the new leader).
      const runs = executions(marks).filter((e) => e.run.startsWith('chain-'));
      expect(overlapping(runs)).toEqual([]);
      expect(runs.length).toBe(12);
      const { rows: attempts } = await client.query<{ task_id: string; tries: string }>(
        `select ti.task_id, count(ar.try_number) as tries from task_instances ti
         join dag_runs r on r.id = ti.dag_run_id
         left join attempt_records ar on ar.task_instance_id = ti.id
        where r.dag_id = 'chain' group by ti.id, ti.task_id`,
      );
      expect(attempts.map((a) => Number(a.tries))).toEqual(Array(12).fill(1));
      for (let i = 0; i < 4; i++)
        for (const t of ['t1', 't2', 't3'])
          expect(podsOfTask('chain', `chain-${i}`, t).size).toBe(1);

      // Every pod ran where the operator said: the tenant's namespace, its service account, no
      // Kubernetes credential mounted; and finished pods are garbage-collected.
      expect(podLog.length).toBeGreaterThan(0);
      for (const v of podLog) {
        expect(v.pod.metadata.namespace).toBe(kube.namespace);
        expect(v.pod.spec.serviceAccountName).toBe('leoflow-task');
        expect(v.pod.spec.automountServiceAccountToken).toBe(false);
      }
      await waitFor(
        'finished pods to be deleted',
        async () =>
          (await kube.api.list(`/api/v1/namespaces/${kube.namespace}/pods`)).filter(
            (p) => p.metadata.labels?.[LABEL.executor] === 'kubernetes',
          ).length === 0
            ? true
            : undefined,
        30_000,
      );
      // ttl + renew (3.5 s) plus polling on a loaded machine
      expect(takeoverMs).toBeLessThan(15_000);
    }, 150_000);

    it('secrets reach only the declaring task; its envvar token, read from its Pod, opens nothing without its agent’s session key, while it runs or after (issue 34); no canary in any log, API response or pod', async () => {
      await trigger(apiReplicas(), token, 'secrets', 'secrets-0');
      const declared = join(marks, 'secrets__secrets-0__declares');
      await waitFor('the declaring task to read its secrets', async () => {
        try {
          return readdirSync(marks).includes('secrets__secrets-0__declares') ? true : undefined;
        } catch {
          return undefined;
        }
      });
      const [pod] = [...podsOfTask('secrets', 'secrets-0', 'declares').values()];
      const stolen = pod!.map(envToken).find((t) => t !== undefined)!;
      expect(stolen).toMatch(/^eyJ/);
      // Live (the task sleeps after reading): the token read from the Pod is a copy without the
      // session key its agent bound at Register, so it opens nothing (issue 34) — before this,
      // anyone who could get pods held the attempt's secrets until it ended. The agent itself was
      // served (the declaring task read both values, checked below).
      expect(await refusal(replayWith(stolen).getVariables({}))).toBe('Unauthenticated');
      expect(await refusal(replayWith(stolen).heartbeat({}))).toBe('Unauthenticated');

      const done = await waitFor(
        'the secrets run to finish',
        () => allFinished(client, 'secrets', 1),
        60_000,
      );
      expect([...done.values()]).toEqual(['success']);
      // Finished: the same token, still unexpired, still opens nothing.
      expect(await refusal(replayWith(stolen).getVariables({}))).toBe('Unauthenticated');
      expect(await refusal(replayWith(stolen).getConnections({}))).toBe('Unauthenticated');

      // The declaring task got both values; the other task got no secret (and no token).
      expect(readFileSync(declared, 'utf8').trim().split('\n')).toEqual([
        sha(CANARY_VAR),
        sha(WAREHOUSE_URI),
      ]);
      expect(readFileSync(join(marks, 'secrets__secrets-0__other'), 'utf8').trim()).toBe('');
      const { rows: delivered } = await client.query<{
        task_id: string;
        v: string | null;
        c: string | null;
      }>(
        `select task_id, variables_delivered as v, connections_delivered as c from attempt_records
        where dag_id = 'secrets' order by task_id`,
      );
      expect(delivered.map((d) => [d.task_id, d.v ?? '', d.c ?? ''])).toEqual([
        ['declares', expect.stringContaining('canary_var'), expect.stringContaining('warehouse')],
        [
          'other',
          expect.not.stringContaining('canary_var'),
          expect.not.stringContaining('warehouse'),
        ],
      ]);

      // Where a canary must not be: every API answer (runs, task instances, logs of every task),
      // both replicas' output, every version of every pod the apiserver stored (the envvar token
      // is on the pod — the documented exposure — but no secret is), the objects in the cluster
      // and every file on the node (container logs, volumes).
      const seen: { site: string; text: string }[] = [];
      for (const dag of ['secrets', 'chain', 'hello']) {
        const list = await get<{ runs: { run_id: string }[] }>(`/api/v1/runs?dag_id=${dag}`);
        for (const run of list.runs) {
          const tis = await get<{ task_instances: { task_id: string }[] }>(
            `/api/v1/dags/${dag}/runs/${run.run_id}/tasks`,
          );
          for (const ti of tis.task_instances)
            await get(`/api/v1/dags/${dag}/runs/${run.run_id}/tasks/${ti.task_id}/logs`);
        }
      }
      seen.push(...responses.map((text) => ({ site: 'an API or CLI response', text })));
      for (const r of replicas.values())
        seen.push({ site: `replica ${r.spec.name} output`, text: r.output() });
      for (const v of podLog)
        seen.push({ site: `pod ${v.pod.metadata.name}`, text: JSON.stringify(v.pod) });
      for (const type of ['secrets', 'configmaps', 'serviceaccounts', 'events']) {
        for (const o of await kube.api.list(`/api/v1/${type}`))
          seen.push({ site: `${type} in the cluster`, text: JSON.stringify(o) });
      }
      for (const text of filesBelow(join(scratch.dir, 'kube', 'kubelet')))
        seen.push({ site: 'a file on the node', text });
      expect(seen.filter((s) => s.site === 'a file on the node').length).toBeGreaterThan(0);
      for (const c of CANARIES)
        expect(seen.filter((s) => s.text.includes(c)).map((s) => s.site)).toEqual([]);
      // And the token itself is on the pod in exactly the one env value the transport names.
      for (const v of podLog) {
        const rest = structuredClone(v.pod);
        for (const e of rest.spec.containers.flatMap((c) => c.env ?? []))
          if (e.name === AGENT_TOKEN_ENV) e.value = '';
        expect(JSON.stringify(rest)).not.toMatch(/eyJ[\w-]+\.[\w-]+\./);
      }
    }, 90_000);
  });
});
