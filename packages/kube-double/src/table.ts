// Server-side printing: the meta.k8s.io/v1 Table kubectl asks for (`Accept: ...;as=Table`).
import type { KubeObject, Pod } from './objects.js';

interface Column {
  name: string;
  type: 'string' | 'integer' | 'date';
  format?: string;
  description: string;
  priority: number;
  cell: (object: KubeObject, now: number) => string | number;
}

/** metav1 duration.HumanDuration, the AGE column's format. */
export function humanDuration(milliseconds: number): string {
  const seconds = Math.max(0, Math.floor(milliseconds / 1000));
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 10) return seconds % 60 === 0 ? `${minutes}m` : `${minutes}m${seconds % 60}s`;
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`;
  if (hours < 48) return `${hours}h`;
  const days = Math.floor(hours / 24);
  if (hours < 192) return hours % 24 === 0 ? `${days}d` : `${days}d${hours % 24}h`;
  if (days < 365 * 2) return `${days}d`;
  return `${Math.floor(days / 365)}y`;
}

const name: Column = {
  name: 'Name',
  type: 'string',
  format: 'name',
  description: 'Name must be unique within a namespace.',
  priority: 0,
  cell: (object) => object.metadata.name ?? '',
};

const age: Column = {
  name: 'Age',
  type: 'string',
  description:
    'CreationTimestamp is a timestamp representing the server time when this object was created.',
  priority: 0,
  cell: (object, now) =>
    object.metadata.creationTimestamp === undefined
      ? '<unknown>'
      : humanDuration(now - Date.parse(object.metadata.creationTimestamp)),
};

/** The STATUS column kubectl shows for a pod: the most specific reason available. */
export function podDisplayStatus(pod: Pod): string {
  if (pod.metadata.deletionTimestamp !== undefined) return 'Terminating';
  let reason = pod.status?.reason ?? pod.status?.phase ?? 'Pending';
  for (const status of pod.status?.containerStatuses ?? []) {
    const waiting = status.state.waiting?.reason;
    const terminated = status.state.terminated;
    if (waiting !== undefined && waiting !== '') reason = waiting;
    else if (terminated !== undefined) {
      reason =
        terminated.reason ??
        (terminated.signal ? `Signal:${terminated.signal}` : `ExitCode:${terminated.exitCode}`);
    }
  }
  return reason;
}

const KIND_COLUMNS: Record<string, Column[]> = {
  Pod: [
    name,
    {
      name: 'Ready',
      type: 'string',
      description: 'The aggregate readiness state of this pod for accepting traffic.',
      priority: 0,
      cell: (object) => {
        const pod = object as Pod;
        const ready = (pod.status?.containerStatuses ?? []).filter((status) => status.ready).length;
        return `${ready}/${pod.spec.containers.length}`;
      },
    },
    {
      name: 'Status',
      type: 'string',
      description: 'The aggregate status of the containers in this pod.',
      priority: 0,
      cell: (object) => podDisplayStatus(object as Pod),
    },
    {
      name: 'Restarts',
      type: 'string',
      description: 'The number of times the containers in this pod have been restarted.',
      priority: 0,
      cell: (object) =>
        String(
          ((object as Pod).status?.containerStatuses ?? []).reduce(
            (sum, status) => sum + status.restartCount,
            0,
          ),
        ),
    },
    age,
    {
      name: 'IP',
      type: 'string',
      description: 'IP address allocated to the pod.',
      priority: 1,
      cell: (object) => (object as Pod).status?.podIP ?? '<none>',
    },
    {
      name: 'Node',
      type: 'string',
      description: 'Name of the Node this pod is scheduled on.',
      priority: 1,
      cell: (object) => (object as Pod).spec.nodeName ?? '<none>',
    },
  ],
  Namespace: [
    name,
    {
      name: 'Status',
      type: 'string',
      description: 'The status of the namespace',
      priority: 0,
      cell: (object) => (object.status as { phase?: string } | undefined)?.phase ?? 'Active',
    },
    age,
  ],
  Secret: [
    name,
    {
      name: 'Type',
      type: 'string',
      description: 'The type of the secret',
      priority: 0,
      cell: (object) => (object.type as string | undefined) ?? 'Opaque',
    },
    {
      name: 'Data',
      type: 'integer',
      description: 'The number of entries in the secret',
      priority: 0,
      cell: (object) =>
        Object.keys((object.data as Record<string, string> | undefined) ?? {}).length,
    },
    age,
  ],
  ConfigMap: [
    name,
    {
      name: 'Data',
      type: 'integer',
      description: 'The number of entries in the config map',
      priority: 0,
      cell: (object) =>
        Object.keys((object.data as Record<string, string> | undefined) ?? {}).length,
    },
    age,
  ],
};

function columnsFor(kind: string): Column[] {
  return KIND_COLUMNS[kind] ?? [name, age];
}

export type IncludeObject = 'None' | 'Metadata' | 'Object';

function rowObject(object: KubeObject, include: IncludeObject): KubeObject | undefined {
  if (include === 'None') return undefined;
  if (include === 'Object') return object;
  return { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: object.metadata };
}

export function toTable(
  kind: string,
  objects: KubeObject[],
  resourceVersion: string,
  now: number,
  include: IncludeObject,
  listMeta: Record<string, string> = {},
) {
  const columns = columnsFor(kind);
  return {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata: { resourceVersion, ...listMeta },
    columnDefinitions: columns.map((column) => ({
      name: column.name,
      type: column.type,
      format: column.format ?? '',
      description: column.description,
      priority: column.priority,
    })),
    rows: objects.map((object) => {
      const row: Record<string, unknown> = {
        cells: columns.map((column) => column.cell(object, now)),
      };
      const attached = rowObject(object, include);
      if (attached !== undefined) row.object = attached;
      return row;
    }),
  };
}

export function wantsTable(accept: string | undefined): boolean {
  return accept !== undefined && /as=Table/.test(accept);
}
