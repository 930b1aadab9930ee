import type { operations } from './api-types';

/**
 * The JSON body of an operation's success reply (200, or 201 for a create), every declared field
 * present (the server's serializer emits them all).
 */
type Ok<Op extends keyof operations> = operations[Op]['responses'] extends {
  200: { content: { 'application/json': infer B } };
}
  ? B
  : operations[Op]['responses'] extends { 201: { content: { 'application/json': infer B } } }
    ? B
    : never;
type Full<T> = T extends readonly (infer E)[]
  ? Full<E>[]
  : T extends object
    ? { [K in keyof T]-?: Full<Exclude<T[K], undefined>> }
    : T;
export type Reply<Op extends keyof operations> = Full<Ok<Op>>;

export type Dag = Reply<'get_dags'>['dags'][number];
export type Run = Reply<'get_runs'>['runs'][number];
export type TaskInstance =
  Reply<'get_dags_by_dag_id_runs_by_run_id_tasks'>['task_instances'][number];
export type History =
  Reply<'get_dags_by_dag_id_runs_by_run_id_tasks_by_task_id'>['history'][number];
export type LogLine =
  Reply<'get_dags_by_dag_id_runs_by_run_id_tasks_by_task_id_logs'>['lines'][number];
export type Whoami = Reply<'get_whoami'>;
export type Runner = Reply<'get_runners'>['runners'][number];

/** The parts of a DAG spec the pages show (the REST API returns the spec as a free-form object). */
export interface SpecTask {
  task_id: string;
  type: string;
  depends_on: string[];
  trigger_rule: string;
  retries: number;
  variables: string[];
  connections: string[];
  /** the full id of its task group (issue 41) */
  group?: string | undefined;
  /** a mapped task's arguments */
  expand?: unknown[] | undefined;
  setup?: boolean | undefined;
  teardown?: boolean | undefined;
  branch?: unknown;
  short_circuit?: unknown;
}
export interface TaskGroup {
  group_id: string;
  parent?: string | undefined;
  tooltip?: string | undefined;
}
export interface Spec {
  dag_id: string;
  description?: string | null;
  owner?: string | null;
  tags?: string[];
  schedule: string | null;
  schedule_timezone: string;
  params?: Record<string, unknown>;
  variables?: string[];
  connections?: string[];
  task_groups?: TaskGroup[];
  tasks: SpecTask[];
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** Called when the server says the session is gone; the app routes to the sign-in page. */
let onSignedOut: () => void = () => {};
export function setSignedOutHandler(fn: () => void): void {
  onSignedOut = fn;
}

/**
 * Every call rides the HttpOnly session cookie (scripts never see a token) and sends the CSRF
 * header the server requires of state-changing cookie requests.
 */
export async function api<T>(
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
  path: string,
  body?: unknown,
): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (method !== 'GET') headers['x-leoflow-csrf'] = '1';
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, {
    method,
    headers,
    credentials: 'same-origin',
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  let json: unknown = null;
  try {
    json = text === '' ? null : JSON.parse(text);
  } catch {
    json = null;
  }
  if (!res.ok) {
    const e = (json ?? {}) as { code?: string; message?: string };
    if (res.status === 401 && !path.startsWith('/api/ui/session')) onSignedOut();
    throw new ApiError(
      res.status,
      e.code ?? 'LF_HTTP',
      e.message ?? `${res.status} ${res.statusText}`,
    );
  }
  return json as T;
}

export const get = <T>(path: string) => api<T>('GET', path);
export const enc = encodeURIComponent;
