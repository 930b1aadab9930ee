import { createHash } from 'node:crypto';

/** The label keys on every pod the Kubernetes executor creates. */
export const LABEL = {
  managedBy: 'app.kubernetes.io/managed-by',
  /** which control plane (installation) created the pod: adoption never crosses installations */
  instance: 'leoflow.io/instance',
  /** the executor's name, as recorded on the claim */
  executor: 'leoflow.io/executor',
  /** marks every task pod; the NetworkPolicy in deploy/ selects on it */
  component: 'app.kubernetes.io/component',
  tenant: 'leoflow.io/tenant-id',
  dag: 'leoflow.io/dag-id',
  run: 'leoflow.io/run-id',
  task: 'leoflow.io/task-id',
  try: 'leoflow.io/try-number',
  taskInstance: 'leoflow.io/task-instance-id',
  dispatchGen: 'leoflow.io/dispatch-gen',
} as const;

export const MANAGED_BY = 'leoflow';
export const TASK_COMPONENT = 'task';

/**
 * The attempt's exact (unsanitised) identity, as JSON. Labels are sanitised and can be lossy, so
 * this annotation is the one contract an agent-side or exchange-side reader keys on.
 */
export const IDENTITY_ANNOTATION = 'leoflow.io/agent-identity';

const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const MAX_LABEL_VALUE = 63;

function shortHash(text: string, chars: number): string {
  return createHash('sha256').update(text).digest('hex').slice(0, chars);
}

/**
 * A valid label value for any string: ≤ 63 characters of [A-Za-z0-9._-], starting and ending
 * alphanumeric. A value that is already valid is kept; any other is cleaned and given a hash of
 * the original, so two different values never collapse into one label (ids that differ only in
 * the characters a label cannot hold stay apart).
 */
export function labelValue(raw: string): string {
  if (raw.length <= MAX_LABEL_VALUE && LABEL_VALUE.test(raw)) return raw;
  const hash = shortHash(raw, 10);
  const cleaned = raw
    .replace(/[^A-Za-z0-9._-]+/g, '_')
    .replace(/^[^A-Za-z0-9]+/, '')
    .slice(0, MAX_LABEL_VALUE - hash.length - 1)
    .replace(/[^A-Za-z0-9]+$/, '');
  return cleaned === '' ? hash : `${cleaned}-${hash}`;
}

/** A DNS-1123 label fragment: lower-case alphanumerics and '-'. */
function slug(raw: string, max: number): string {
  return raw
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+/, '')
    .slice(0, max)
    .replace(/-+$/, '');
}

/**
 * The pod's name: readable (dag, task, try) and unique per dispatch (a hash of the task
 * instance, try and dispatch generation). Deterministic, so creating the same dispatch twice
 * answers AlreadyExists instead of starting a twin. At most 63 characters (a valid hostname).
 */
export function podName(
  taskInstanceId: string,
  tryNumber: number,
  dispatchGen: number,
  dag: string,
  task: string,
): string {
  const hash = shortHash(`${taskInstanceId}\u0000${tryNumber}\u0000${dispatchGen}`, 10);
  const head = [slug(dag, 20), slug(task, 20)].filter((s) => s !== '').join('-');
  return `lf-${head ? `${head}-` : ''}${tryNumber}-${hash}`.slice(0, 63);
}
