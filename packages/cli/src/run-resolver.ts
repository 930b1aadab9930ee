import { ApiClient, CliError } from './client.js';

export interface RunRef {
  dag_id: string;
  run_id: string;
}

/** Run ids are unique per DAG; a bare run id is resolved when exactly one DAG has it. */
export async function resolveRun(
  client: ApiClient,
  runId: string,
  dagId?: string,
): Promise<RunRef> {
  if (runId === 'latest') {
    if (!dagId) {
      throw new CliError('"latest" needs the DAG: pass --dag <dag_id>', 2, 'LF_USAGE');
    }
    const res = await client.request<{ runs: { dag_id: string; run_id: string }[] }>(
      'GET',
      `/api/v1/runs?dag_id=${encodeURIComponent(dagId)}&limit=1`,
    );
    const newest = res.runs[0];
    if (!newest) {
      throw new CliError(
        `DAG ${dagId} has no runs yet; trigger one with \`leoflow runs trigger ${dagId}\``,
        1,
        'LF_RUN_NOT_FOUND',
      );
    }
    return { dag_id: newest.dag_id, run_id: newest.run_id };
  }
  if (dagId) return { dag_id: dagId, run_id: runId };
  const res = await client.request<{ runs: { dag_id: string; run_id: string }[] }>(
    'GET',
    `/api/v1/runs?run_id=${encodeURIComponent(runId)}&limit=10`,
  );
  if (res.runs.length === 0) {
    throw new CliError(
      `no run "${runId}"; list runs with \`leoflow runs list\``,
      1,
      'LF_RUN_NOT_FOUND',
    );
  }
  if (res.runs.length > 1) {
    const dags = res.runs.map((r) => r.dag_id).join(', ');
    throw new CliError(
      `run id "${runId}" exists in several DAGs (${dags}); pass --dag <dag_id>`,
      2,
      'LF_RUN_AMBIGUOUS',
    );
  }
  const only = res.runs[0] as RunRef;
  return { dag_id: only.dag_id, run_id: only.run_id };
}

export function runPath(ref: RunRef): string {
  return `/api/v1/dags/${encodeURIComponent(ref.dag_id)}/runs/${encodeURIComponent(ref.run_id)}`;
}
