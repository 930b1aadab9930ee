// The real kubectl against the double and against the real kube-apiserver (or, with KUBECONFIG
// set, against that cluster only): the same assertions must hold on each, which is what makes them
// fidelity tests.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BUSYBOX,
  CLUSTER_KINDS,
  eventually,
  startCluster,
  uniqueNamespace,
  type Cluster,
} from './support/cluster.js';

describe.each(CLUSTER_KINDS)('kubectl against the %s', (kind) => {
  let cluster: Cluster;
  const namespace = uniqueNamespace('kd-fidelity');

  beforeAll(async () => {
    cluster = await startCluster({ kind });
    const created = await cluster.kubectl(['create', 'namespace', namespace]);
    expect(created.stderr).toBe('');
    // A new namespace's `default` ServiceAccount is the controller manager's work on a cluster.
    await eventually('the default ServiceAccount', async () =>
      (await cluster.kubectl(['-n', namespace, 'get', 'serviceaccount', 'default'])).code === 0
        ? true
        : undefined,
    );
  }, 120_000);

  afterAll(async () => {
    await cluster?.kubectl(['delete', 'namespace', namespace, '--wait=false']);
    await cluster?.close();
  });

  function kustomizeDir(): string {
    const dir = join(cluster.dir, 'kustomize');
    mkdirSync(dir, { recursive: true });
    const files: Record<string, string> = {
      'kustomization.yaml': `namespace: ${namespace}\nresources:\n  - objects.yaml\nconfigMapGenerator:\n  - name: settings\n    literals: [mode=test]\nlabels:\n  - pairs: {app.kubernetes.io/part-of: kd-fidelity}\n`,
      'objects.yaml': `apiVersion: v1
kind: ServiceAccount
metadata: {name: control-plane}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pods}
rules:
  - apiGroups: [""]
    resources: [pods]
    verbs: [get, list, watch, create, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: control-plane-pods}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pods}
subjects:
  - {kind: ServiceAccount, name: control-plane}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  replicas: 2
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      serviceAccountName: control-plane
      containers:
        - name: api
          image: ${BUSYBOX}
          args: [sleep, "3600"]
          ports: [{containerPort: 8080, name: http}]
          env: [{name: MODE, valueFrom: {configMapKeyRef: {name: settings, key: mode}}}]
---
apiVersion: v1
kind: Service
metadata: {name: api}
spec:
  selector: {app: api}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: agent-port-only}
spec:
  podSelector: {matchLabels: {app: api}}
  policyTypes: [Ingress]
  ingress:
    - ports: [{port: 8080, protocol: TCP}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: api}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: api}}
`,
    };
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
    return dir;
  }

  it('reports its server version and lists the namespaces', async () => {
    const version = await cluster.kubectl(['version', '-o', 'json']);
    expect(version.code).toBe(0);
    const parsed = JSON.parse(version.stdout) as {
      serverVersion: { major: string; minor: string };
    };
    if (cluster.minor !== undefined)
      expect(parsed.serverVersion).toMatchObject({ major: '1', minor: cluster.minor });
    const names = await cluster.kubectl(['get', 'namespaces', '-o', 'name']);
    expect(names.stdout.split('\n')).toEqual(
      expect.arrayContaining(['namespace/default', `namespace/${namespace}`]),
    );
  });

  it('applies a kustomization, and a second apply changes nothing', async () => {
    const dir = kustomizeDir();
    const first = await cluster.kubectl(['apply', '-k', dir]);
    expect(first.stderr).toBe('');
    expect(first.stdout).toMatch(/deployment\.apps\/api created/);
    expect(first.stdout).toMatch(/networkpolicy\.networking\.k8s\.io\/agent-port-only created/);
    expect(first.stdout).toMatch(/poddisruptionbudget\.policy\/api created/);
    const second = await cluster.kubectl(['apply', '-k', dir]);
    expect(second.stderr).toBe('');
    const lines = second.stdout.trim().split('\n');
    expect(lines.length).toBe(first.stdout.trim().split('\n').length);
    for (const line of lines) {
      // A PodDisruptionBudget's spec.selector has patch strategy "replace", so kubectl's computed
      // patch is never empty and a real cluster reports it "configured" on every apply too.
      if (line.startsWith('poddisruptionbudget.policy/')) expect(line).toMatch(/ configured$/);
      else expect(line).toMatch(/ unchanged$/);
    }
    const deployment = await cluster.kubectl([
      '-n',
      namespace,
      'get',
      'deployment',
      'api',
      '-o',
      'jsonpath={.spec.template.spec.containers[0].ports[0].name}',
    ]);
    expect(deployment.stdout).toBe('http');
  });

  it('applies a change as a patch and keeps the fields it did not touch', async () => {
    const dir = kustomizeDir();
    await cluster.kubectl(['apply', '-k', dir]);
    const patched = await cluster.kubectl([
      '-n',
      namespace,
      'patch',
      'deployment',
      'api',
      '--type=strategic',
      '-p',
      '{"spec":{"template":{"spec":{"containers":[{"name":"api","env":[{"name":"EXTRA","value":"1"}]}]}}}}',
    ]);
    expect(patched.stdout).toMatch(/patched/);
    const env = await cluster.kubectl([
      '-n',
      namespace,
      'get',
      'deployment',
      'api',
      '-o',
      'jsonpath={.spec.template.spec.containers[0].env[*].name}',
    ]);
    // A strategic merge patch without $setElementOrder: the patched items in the patch's order
    // and the untouched ones in the server's, interleaved by server position (a new one first).
    expect(env.stdout).toBe('EXTRA MODE');
    await cluster.kubectl([
      '-n',
      namespace,
      'patch',
      'deployment',
      'api',
      '--type=strategic',
      '-p',
      '{"spec":{"template":{"spec":{"containers":[{"name":"api","env":[{"name":"EXTRA","value":"2"},{"name":"LATE","value":"1"},{"name":"FIRST","value":"1"}]}]}}}}',
    ]);
    const again = await cluster.kubectl([
      '-n',
      namespace,
      'get',
      'deployment',
      'api',
      '-o',
      'jsonpath={.spec.template.spec.containers[0].env[*].name}',
    ]);
    expect(again.stdout).toBe('EXTRA LATE FIRST MODE');
  });

  it('answers NotFound and AlreadyExists as the apiserver words them', async () => {
    const missing = await cluster.kubectl(['-n', namespace, 'get', 'pod', 'no-such-pod']);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr.trim()).toBe(
      'Error from server (NotFound): pods "no-such-pod" not found',
    );
    await cluster.kubectl(['-n', namespace, 'create', 'configmap', 'twice']);
    const again = await cluster.kubectl(['-n', namespace, 'create', 'configmap', 'twice']);
    expect(again.stderr.trim()).toBe(
      'error: failed to create configmap: configmaps "twice" already exists',
    );
  });

  it('runs a pod to completion and waits for it by condition and by jsonpath, then deletes it', async () => {
    const pod = `apiVersion: v1
kind: Pod
metadata: {name: once, namespace: ${namespace}}
spec:
  restartPolicy: Never
  automountServiceAccountToken: false
  containers:
    - name: main
      image: ${BUSYBOX}
      command: [sh, -c, 'echo "hello from $(POD_NAME)"; sleep 1']
      env: [{name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
`;
    const applied = await cluster.kubectl(['apply', '-f', '-'], { input: pod });
    expect(applied.stdout.trim()).toBe('pod/once created');
    const ready = await cluster.kubectl([
      '-n',
      namespace,
      'wait',
      '--for=condition=Ready',
      'pod/once',
      '--timeout=30s',
    ]);
    expect(ready.stdout.trim()).toBe('pod/once condition met');
    const done = await cluster.kubectl([
      '-n',
      namespace,
      'wait',
      '--for=jsonpath={.status.phase}=Succeeded',
      'pod/once',
      '--timeout=30s',
    ]);
    expect(done.stdout.trim()).toBe('pod/once condition met');
    const reason = await cluster.kubectl([
      '-n',
      namespace,
      'get',
      'pod',
      'once',
      '-o',
      'jsonpath={.status.containerStatuses[0].state.terminated.reason}/{.status.containerStatuses[0].state.terminated.exitCode}',
    ]);
    expect(reason.stdout).toBe('Completed/0');
    const logs = await cluster.kubectl(['-n', namespace, 'logs', 'once']);
    expect(logs.stdout).toBe('hello from once\n');
    const deleted = await cluster.kubectl([
      '-n',
      namespace,
      'delete',
      'pod',
      'once',
      '--timeout=30s',
    ]);
    expect(deleted.stdout.trim()).toBe('pod "once" deleted');
    const gone = await cluster.kubectl(['-n', namespace, 'get', 'pod', 'once']);
    expect(gone.stderr).toMatch(/NotFound/);
  });

  it('streams changes with get -w', async () => {
    const watch = cluster.kubectl([
      '-n',
      namespace,
      'get',
      'configmaps',
      '-w',
      '--request-timeout=3s',
      '-o',
      'name',
    ]);
    await new Promise((resolve) => setTimeout(resolve, 800));
    await cluster.kubectl(['-n', namespace, 'create', 'configmap', 'watched']);
    const result = await watch;
    expect(result.stdout.split('\n')).toContain('configmap/watched');
  });

  it('mints a service-account token with create token that the cluster accepts as that account', async () => {
    const minted = await cluster.kubectl([
      '-n',
      namespace,
      'create',
      'token',
      'default',
      '--duration=15m',
    ]);
    expect(minted.code).toBe(0);
    const token = minted.stdout.trim();
    const claims = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString()) as {
      sub: string;
      exp: number;
      iat: number;
    };
    expect(claims.sub).toBe(`system:serviceaccount:${namespace}:default`);
    expect(claims.exp - claims.iat).toBe(900);
    const whoami = await cluster.kubectl([
      'auth',
      'whoami',
      '-o',
      'jsonpath={.status.userInfo.username}',
      '--token',
      token,
    ]);
    expect(whoami.stdout).toBe(`system:serviceaccount:${namespace}:default`);
  });

  it('answers auth can-i from the applied RBAC: granted for the bound account, denied otherwise', async () => {
    await cluster.kubectl(['apply', '-k', kustomizeDir()]);
    const token = (
      await cluster.kubectl(['-n', namespace, 'create', 'token', 'control-plane'])
    ).stdout.trim();
    const can = (verb: string, resource: string, ...extra: string[]) =>
      cluster.kubectl([
        '-n',
        namespace,
        'auth',
        'can-i',
        verb,
        resource,
        ...extra,
        '--token',
        token,
      ]);
    expect((await can('list', 'pods')).stdout.trim()).toBe('yes');
    expect((await can('create', 'pods')).stdout.trim()).toBe('yes');
    const denied = await can('list', 'secrets');
    expect(denied.stdout.trim()).toBe('no');
    expect(denied.code).toBe(1);
    expect((await can('get', 'pods', '--subresource=status')).stdout.trim()).toBe('no');
    const forbidden = await cluster.kubectl(['-n', namespace, 'get', 'secrets', '--token', token]);
    expect(forbidden.stderr.trim()).toBe(
      `Error from server (Forbidden): secrets is forbidden: User "system:serviceaccount:${namespace}:control-plane" cannot list resource "secrets" in API group "" in the namespace "${namespace}"`,
    );
  });

  it('keeps an unschedulable pod Pending with PodScheduled=False', async () => {
    const pod = JSON.stringify({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'too-big', namespace },
      spec: {
        automountServiceAccountToken: false,
        containers: [{ name: 'main', image: BUSYBOX, resources: { requests: { cpu: '64' } } }],
      },
    });
    await cluster.kubectl(['apply', '-f', '-'], { input: pod });
    const waited = await cluster.kubectl([
      '-n',
      namespace,
      'wait',
      '--for=condition=PodScheduled=false',
      'pod/too-big',
      '--timeout=10s',
    ]);
    expect(waited.stdout.trim()).toBe('pod/too-big condition met');
    const reason = await cluster.kubectl([
      '-n',
      namespace,
      'get',
      'pod',
      'too-big',
      '-o',
      'jsonpath={.status.phase}/{.status.conditions[?(@.type=="PodScheduled")].reason}',
    ]);
    expect(reason.stdout).toBe('Pending/Unschedulable');
  });
});
