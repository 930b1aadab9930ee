import { dirname, resolve } from 'node:path';
import {
  checkKubernetesShape,
  ConfigError,
  KUBERNETES_RESOURCE_NAMES,
  parseQuantity,
  type ResourceList,
  type TaskResources,
} from '@leoflow/core';
import { EXECUTOR_KIND_NAMES } from './executor-kinds.js';
import type { KubernetesExecutorConfig } from './server-config.js';
import type { KubernetesTenantConfig } from './kubernetes-tenant-config.js';
import { parseWarmPools } from './warm-pool-config.js';
import { SectionReader, show, type Problem } from './section-reader.js';

/** What the config file's `executor:` section sets (the rest of the file is core's). */
export interface ExecutorSection {
  /** executor.default; undefined = keep the built-in default */
  defaultExecutor?: string;
  /** executor.kubernetes; null = the section is absent */
  kubernetes: KubernetesExecutorConfig | null;
}

/** The defaults of the optional executor.kubernetes keys. */
export const KUBERNETES_DEFAULTS = Object.freeze({
  podStartTimeoutMs: 5 * 60_000,
  instance: 'leoflow',
  runAsUser: 65532,
  terminationGracePeriodSeconds: 30,
  warmPoolReconcileIntervalMs: 5_000,
});

const SECTION_KEYS = ['default', 'kubernetes'];
const KUBERNETES_KEYS = [
  'kubeconfig',
  'agent_image',
  'agent_url',
  'pod_start_timeout',
  'instance',
  'run_as_user',
  'termination_grace_period',
  'agent_ca_config_map',
  'keep_finished_pods',
  'tenants',
  'warm_pools',
  'warm_pool_reconcile_interval',
];
const TENANT_KEYS = [
  'namespace',
  'images',
  'service_accounts',
  'max_resources',
  'default_resources',
];

/** A namespace name (DNS-1123 label), as the apiserver checks it. */
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** A label value (leoflow.io/instance carries this one verbatim). */
const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$/;

function isMapping(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Reads the config file's `executor:` section: `default` (which executor runs tasks that name
 * none) and `kubernetes` (docs/configuration.md). Every problem is collected and reported at
 * once as LF_CONFIG_INVALID with the dotted key of each, so an operator fixes them in one pass.
 * `configFile` anchors a relative kubeconfig path (the file's own directory, not the cwd).
 */
export function parseExecutorSection(raw: unknown, configFile: string | null): ExecutorSection {
  const problems: { key: string; message: string }[] = [];
  const problem = (key: string, message: string) => problems.push({ key, message });
  const out: ExecutorSection = { kubernetes: null };
  if (raw === undefined || raw === null) return out;
  if (!isMapping(raw)) {
    problem('executor', 'executor must be a mapping (executor:\n  default: kubernetes)');
    throw executorConfigError(problems);
  }
  unknownKeys(raw, SECTION_KEYS, 'executor', problem);

  if (raw.kubernetes !== undefined && raw.kubernetes !== null) {
    out.kubernetes = parseKubernetes(raw.kubernetes, configFile, problem);
  }
  if (raw.default !== undefined) {
    const known: readonly string[] = EXECUTOR_KIND_NAMES;
    if (typeof raw.default !== 'string' || !known.includes(raw.default)) {
      problem(
        'executor.default',
        `executor.default is ${show(raw.default)}; set it to one of ${known.join(', ')}`,
      );
    } else if (raw.default === 'kubernetes' && raw.kubernetes == null) {
      problem(
        'executor.default',
        'executor.default is "kubernetes" but there is no executor.kubernetes section; add it (agent_image, tenants) or set executor.default to subprocess',
      );
    } else {
      out.defaultExecutor = raw.default;
    }
  }
  if (problems.length > 0) throw executorConfigError(problems);
  return out;
}

function executorConfigError(problems: { key: string; message: string }[]): ConfigError {
  return new ConfigError(
    'LF_CONFIG_INVALID',
    `refusing to start: invalid configuration\n${problems.map((p) => `  - ${p.message}`).join('\n')}`,
    { problems },
  );
}

function unknownKeys(
  obj: Record<string, unknown>,
  known: readonly string[],
  base: string,
  problem: Problem,
): void {
  for (const k of Object.keys(obj)) {
    if (!known.includes(k)) {
      problem(
        `${base}.${k}`,
        `unknown configuration key ${base}.${k}; ${base} takes ${known.join(', ')}`,
      );
    }
  }
}

function parseKubernetes(
  raw: unknown,
  configFile: string | null,
  problem: Problem,
): KubernetesExecutorConfig | null {
  const base = 'executor.kubernetes';
  if (!isMapping(raw)) {
    problem(base, `${base} must be a mapping (agent_image, tenants, …)`);
    return null;
  }
  unknownKeys(raw, KUBERNETES_KEYS, base, problem);
  const read = new SectionReader(raw, base, problem);
  const kubeconfig = read.string('kubeconfig', false);
  const agentImage = read.string('agent_image', true);
  const agentUrl = read.string('agent_url', false);
  // One URL (the agent Service) or several, comma-separated: a pod's agent tries them in turn.
  if (agentUrl !== null && !agentUrl.split(',').every((u) => /^https?:\/\/[^/]+/.test(u.trim()))) {
    problem(
      `${base}.agent_url`,
      `${base}.agent_url is ${show(agentUrl)}; set it to the http(s):// URL task pods dial (the agent Service, e.g. https://leoflow-agent.leoflow.svc:8793), or several comma-separated`,
    );
  }
  const instance = read.string('instance', false) ?? KUBERNETES_DEFAULTS.instance;
  if (!LABEL_VALUE.test(instance)) {
    problem(
      `${base}.instance`,
      `${base}.instance is ${show(instance)}; it labels every pod, so it must be a label value (≤ 63 letters, digits, -_. , alphanumeric at both ends)`,
    );
  }
  const tenants = parseTenants(raw.tenants, base, problem);
  const warmPools = parseWarmPools(
    raw.warm_pools,
    tenants,
    agentImage,
    `${base}.warm_pools`,
    problem,
  );
  const warmPoolReconcileIntervalMs = read.positiveDurationMs(
    'warm_pool_reconcile_interval',
    KUBERNETES_DEFAULTS.warmPoolReconcileIntervalMs,
    '5s (how often warm pools are topped up and checked)',
  );
  const config = {
    ...(warmPools.length > 0 ? { warmPools, warmPoolReconcileIntervalMs } : {}),
    kubeconfig:
      kubeconfig === null
        ? null
        : resolve(configFile ? dirname(resolve(configFile)) : process.cwd(), kubeconfig),
    agentUrl,
    podStartTimeoutMs: read.positiveDurationMs(
      'pod_start_timeout',
      KUBERNETES_DEFAULTS.podStartTimeoutMs,
      '5m (how long a pod may stay Pending)',
    ),
    instance,
    runAsUser: read.int('run_as_user', KUBERNETES_DEFAULTS.runAsUser, 1),
    terminationGracePeriodSeconds: read.int(
      'termination_grace_period',
      KUBERNETES_DEFAULTS.terminationGracePeriodSeconds,
      0,
    ),
    agentCaConfigMap: parseAgentCaConfigMap(raw.agent_ca_config_map, base, problem),
    keepFinishedPods: read.boolean('keep_finished_pods', false),
    tenants,
  };
  return agentImage === null ? null : { ...config, agentImage };
}

function parseAgentCaConfigMap(
  ca: unknown,
  base: string,
  problem: Problem,
): KubernetesExecutorConfig['agentCaConfigMap'] {
  if (ca === undefined || ca === null) return null;
  if (
    !isMapping(ca) ||
    typeof ca.name !== 'string' ||
    !DNS_LABEL.test(ca.name) ||
    (ca.key !== undefined && typeof ca.key !== 'string')
  ) {
    problem(
      `${base}.agent_ca_config_map`,
      `${base}.agent_ca_config_map is ${show(ca)}; set it to { name: <ConfigMap in the task namespace>, key: ca.crt }`,
    );
    return null;
  }
  return { name: ca.name, key: typeof ca.key === 'string' ? ca.key : 'ca.crt' };
}

function parseTenants(
  raw: unknown,
  base: string,
  problem: Problem,
): Record<string, KubernetesTenantConfig> {
  const tenants: Record<string, KubernetesTenantConfig> = {};
  if (!isMapping(raw) || Object.keys(raw).length === 0) {
    problem(
      `${base}.tenants`,
      `${base}.tenants must map at least one tenant id to its placement (tenants:\n  default:\n    namespace: leoflow)`,
    );
    return tenants;
  }
  for (const [id, t] of Object.entries(raw)) {
    const parsed = parseTenant(t, `${base}.tenants.${id}`, problem);
    if (parsed) tenants[id] = parsed;
  }
  return tenants;
}

function parseTenant(raw: unknown, base: string, problem: Problem): KubernetesTenantConfig | null {
  if (!isMapping(raw)) {
    problem(base, `${base} must be a mapping (namespace, images, service_accounts, …)`);
    return null;
  }
  unknownKeys(raw, TENANT_KEYS, base, problem);
  let ok = true;
  const namespace = raw.namespace;
  if (typeof namespace !== 'string' || !DNS_LABEL.test(namespace)) {
    problem(
      `${base}.namespace`,
      `${base}.namespace is ${show(namespace)}; set it to the namespace this tenant's pods run in (a DNS label: lower-case letters, digits, -)`,
    );
    ok = false;
  }
  const list = (key: string): string[] => {
    const v = raw[key];
    if (v === undefined || v === null) return [];
    if (!Array.isArray(v) || v.some((s) => typeof s !== 'string' || s.trim() === '')) {
      problem(`${base}.${key}`, `${base}.${key} is ${show(v)}; set it to a list of names`);
      ok = false;
      return [];
    }
    return v as string[];
  };
  const images = list('images');
  const serviceAccounts = list('service_accounts');
  // The same checks a task's own choice gets, so a default the operator writes is one a task
  // could have written.
  for (const i of checkKubernetesShape({ ...(images[0] ? { image: images[0] } : {}) }, base)) {
    problem(`${base}.images`, `${base}.images: ${i.message}`);
    ok = false;
  }
  for (const [n, sa] of serviceAccounts.entries()) {
    for (const i of checkKubernetesShape({ service_account: sa }, base)) {
      problem(`${base}.service_accounts[${n}]`, `${base}.service_accounts[${n}]: ${i.message}`);
      ok = false;
    }
  }
  if (serviceAccounts.length === 0) {
    problem(
      `${base}.service_accounts`,
      `${base}.service_accounts must list at least one service account (the first is what tasks run as by default; give it no Role)`,
    );
    ok = false;
  }
  const maxResources: ResourceList = {};
  const max = raw.max_resources;
  if (max !== undefined && max !== null) {
    if (!isMapping(max)) {
      problem(
        `${base}.max_resources`,
        `${base}.max_resources must be a mapping such as { cpu: "2", memory: 2Gi }`,
      );
      ok = false;
    } else {
      for (const [name, q] of Object.entries(max)) {
        const text = typeof q === 'number' ? String(q) : q;
        if (!(KUBERNETES_RESOURCE_NAMES as readonly string[]).includes(name)) {
          problem(
            `${base}.max_resources.${name}`,
            `${base}.max_resources.${name} is not a resource a task may ask for; use ${KUBERNETES_RESOURCE_NAMES.join(', ')}`,
          );
          ok = false;
        } else if (typeof text !== 'string' || parseQuantity(text) === undefined) {
          problem(
            `${base}.max_resources.${name}`,
            `${base}.max_resources.${name} is ${show(q)}; set it to a quantity such as 500m or 2Gi`,
          );
          ok = false;
        } else maxResources[name as keyof ResourceList] = text;
      }
    }
  }
  let defaultResources: TaskResources = {};
  const def = raw.default_resources;
  if (def !== undefined && def !== null) {
    const issues = checkKubernetesShape({ resources: def }, base);
    for (const i of issues) {
      problem(`${base}.default_resources`, `${base}.default_resources: ${i.message}`);
      ok = false;
    }
    if (issues.length === 0) defaultResources = def;
  }
  if (!ok) return null;
  return {
    namespace: namespace as string,
    images,
    serviceAccounts,
    maxResources,
    defaultResources,
  };
}
