/**
 * deploy/ as the tests see it: rendered by the real `kubectl kustomize`, applied with the real
 * `kubectl apply -k` to the kube-apiserver double, and walked without `any`: the rendered objects
 * are checked to be manifests (kind, metadata.name), and every field below is reached with at()
 * (unknown) or the *At() accessors, which fail naming the object and the path when it is not
 * there or not of the expected shape.
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { parse, parseAllDocuments } from 'yaml';
import {
  startKubeTestCluster,
  type ApiServerKind,
  type KubeTestCluster,
} from '../../packages/server/test/support/kube-cluster.js';

export const ROOT = resolve(fileURLToPath(import.meta.url), '../../..');
const KUBECTL = '/usr/bin/kubectl';

export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; [field: string]: unknown };
  [field: string]: unknown;
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function isManifest(value: unknown): value is Manifest {
  return (
    isRecord(value) &&
    typeof value.apiVersion === 'string' &&
    typeof value.kind === 'string' &&
    isRecord(value.metadata) &&
    typeof value.metadata.name === 'string' &&
    (value.metadata.namespace === undefined || typeof value.metadata.namespace === 'string')
  );
}

/** `kubectl kustomize` output as manifests; a document that is not one fails the render. */
export function parseManifests(yaml: string, what: string): Manifest[] {
  return parseAllDocuments(yaml).map((d, i) => {
    const o: unknown = d.toJSON();
    if (!isManifest(o)) throw new Error(`${what}: document ${i} is not a manifest`);
    return o;
  });
}

/**
 * `kubectl kustomize <path>` (relative to the repo root, or absolute), offline, with a throwaway
 * --cache-dir. `loadRestrictorNone` for an overlay written outside the tree that reaches into it.
 */
export function render(path: string, opts: { loadRestrictorNone?: boolean } = {}): Manifest[] {
  const cache = mkdtempSync(join(tmpdir(), 'leoflow-kustomize-cache-'));
  try {
    const out = execFileSync(
      KUBECTL,
      [
        'kustomize',
        resolve(ROOT, path),
        ...(opts.loadRestrictorNone ? ['--load-restrictor', 'LoadRestrictionsNone'] : []),
        '--cache-dir',
        cache,
      ],
      { encoding: 'utf8' },
    );
    return parseManifests(out, path);
  } finally {
    rmSync(cache, { recursive: true, force: true });
  }
}

type Key = string | number;

function describeValue(value: unknown): string {
  return isManifest(value) ? `${value.kind}/${value.metadata.name}` : 'the value';
}

/** The value at a path of keys and indexes, or undefined where the path leaves the object. */
export function at(value: unknown, ...path: readonly Key[]): unknown {
  let v = value;
  for (const k of path) {
    if (typeof k === 'number') {
      if (!Array.isArray(v)) return undefined;
      v = (v as unknown[])[k];
    } else {
      if (!isRecord(v)) return undefined;
      v = v[k];
    }
  }
  return v;
}

function shaped<T>(
  value: unknown,
  path: readonly Key[],
  shape: string,
  guard: (v: unknown) => v is T,
): T {
  const v = at(value, ...path);
  if (!guard(v)) throw new Error(`${describeValue(value)} has no ${shape} at .${path.join('.')}`);
  return v;
}

export const recordAt = (value: unknown, ...path: readonly Key[]) =>
  shaped(value, path, 'object', isRecord);
export const arrayAt = (value: unknown, ...path: readonly Key[]) =>
  shaped(value, path, 'array', (v): v is unknown[] => Array.isArray(v));
export const stringAt = (value: unknown, ...path: readonly Key[]) =>
  shaped(value, path, 'string', (v): v is string => typeof v === 'string');

/** The rendered object of that kind (and name, when given); a missing one fails naming both. */
export function find(objects: readonly Manifest[], kind: string, name?: string): Manifest {
  const found = objects.find(
    (o) => o.kind === kind && (name === undefined || o.metadata.name === name),
  );
  if (!found) throw new Error(`no ${kind}${name === undefined ? '' : `/${name}`} rendered`);
  return found;
}

/** A workload's pod spec (spec.template.spec). */
export const podSpec = (workload: Manifest) => recordAt(workload, 'spec', 'template', 'spec');

/** A workload's container by index. */
export const container = (workload: Manifest, index = 0) =>
  recordAt(workload, 'spec', 'template', 'spec', 'containers', index);

/** A container's literal env (name → value); valueFrom entries are left out. */
export function literalEnv(workload: Manifest, index = 0): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of arrayAt(container(workload, index), 'env')) {
    const value = at(e, 'value');
    if (typeof value === 'string') env[stringAt(e, 'name')] = value;
  }
  return env;
}

/** The leoflow-config ConfigMap's config.yaml, parsed: the file the control plane boots with. */
export function shippedConfig(objects: readonly Manifest[]): Record<string, unknown> {
  const cm = find(objects, 'ConfigMap', 'leoflow-config');
  const file: unknown = parse(stringAt(cm, 'data', 'config.yaml'));
  if (!isRecord(file)) throw new Error('leoflow-config: config.yaml is not a mapping');
  return file;
}

export interface KubectlCluster {
  cluster: KubeTestCluster;
  /** The real kubectl against the double (admin unless another kubeconfig is given). */
  kubectl(args: readonly string[], kubeconfig?: string): Promise<string>;
  /**
   * A client config as the install's control-plane ServiceAccount (leoflow-control-plane in
   * `namespace`), with a token the double mints for it (`kubectl create token`).
   */
  controlPlaneConfig(namespace: string): Promise<KubeConfig>;
  /** The same identity as a kubeconfig file (what a control plane's configuration names). */
  controlPlaneKubeconfig(namespace: string): Promise<string>;
  /** `kubectl apply -k <path>` (relative to the repo root, or absolute) as the admin. */
  apply(path: string): Promise<void>;
  stop(): Promise<void>;
}

/**
 * An apiserver for the real kubectl — the double (default) or the real kube-apiserver — with its
 * own kubectl cache (asynchronous calls: the double answers in-process).
 */
export async function startKubectlCluster(
  prefix: string,
  kind: ApiServerKind = 'double',
): Promise<KubectlCluster> {
  const cluster = await startKubeTestCluster({ prefix, kind });
  const kubectl = async (args: readonly string[], kubeconfig = cluster.kubeconfig) =>
    (
      await promisify(execFile)(
        KUBECTL,
        ['--kubeconfig', kubeconfig, '--cache-dir', join(cluster.dir, 'cache'), ...args],
        { encoding: 'utf8' },
      )
    ).stdout;
  const controlPlaneKubeconfig = async (namespace: string) => {
    const token = (
      await kubectl([
        '-n',
        namespace,
        'create',
        'token',
        'leoflow-control-plane',
        '--duration',
        '1h',
      ])
    ).trim();
    return cluster.writeKubeconfig({ token, namespace, file: 'cp.kubeconfig' });
  };
  return {
    cluster,
    kubectl,
    controlPlaneKubeconfig,
    async controlPlaneConfig(namespace) {
      const kc = new KubeConfig();
      kc.loadFromFile(await controlPlaneKubeconfig(namespace));
      return kc;
    },
    async apply(path) {
      await kubectl(['apply', '-k', resolve(ROOT, path)]);
    },
    stop: () => cluster.stop(),
  };
}
