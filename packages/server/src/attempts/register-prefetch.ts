import { create } from '@bufbuild/protobuf';
import {
  FetchXComResponseSchema,
  GetConnectionsResponseSchema,
  GetTaskSpecResponseSchema,
  GetVariablesResponseSchema,
  PrefetchedXComsSchema,
  RegisterPrefetchSchema,
  type RegisterPrefetch,
  type TaskSpec,
} from '@leoflow/protocol';
import { SecretRefusal } from './secret-delivery.js';
import type { XComRow } from '../store/types.js';

/** The attempt's own reads, each exactly what its RPC would do for the same caller. */
export interface RegisterPrefetchSources {
  variables(): Promise<Record<string, string>>;
  connections(): Promise<Record<string, string>>;
  /** the attempt's spec message and the upstreams its task depends on */
  task(): Promise<{ spec: TaskSpec; dependsOn: readonly string[]; dagRunId: string }>;
  /** an upstream's return value (a mapped upstream's as one list: attempts/upstream-xcom.ts) */
  xcom(
    dagRunId: string,
    upstreamTaskId: string,
  ): Promise<Pick<XComRow, 'value' | 'content_type'> | undefined>;
  /** a part that could not be prefetched for a reason other than a refusal (logged, no values) */
  onSkipped(part: 'variables' | 'connections' | 'xcoms' | 'spec', err: unknown): void;
}

/**
 * Register's answer for the attempt's preparation, computed only after its fenced write landed
 * (the caller guarantees it). Every part goes through the same gate its own RPC applies, so the
 * fold changes the number of round trips and nothing about who gets what. A part that fails for
 * any reason but a refusal is left unset: the agent then asks with that part's own RPC, which
 * retries or answers the error as it always has. A refusal is answered once, here, so it is
 * recorded and counted once.
 */
export async function registerPrefetch(
  src: RegisterPrefetchSources,
  wantSpec: boolean,
): Promise<RegisterPrefetch> {
  const out = create(RegisterPrefetchSchema, {});
  const [variables, connections, task] = await Promise.all([
    settle(src.variables()),
    settle(src.connections()),
    settle(src.task()),
  ]);
  if (variables.ok) {
    out.variables = create(GetVariablesResponseSchema, { variables: variables.value });
  } else if (variables.error instanceof SecretRefusal) {
    out.variablesRefused = variables.error.message;
    out.variablesRefusedCode = variables.error.code ?? '';
  } else {
    src.onSkipped('variables', variables.error);
  }
  if (connections.ok) {
    out.connections = create(GetConnectionsResponseSchema, { connectionUris: connections.value });
  } else if (connections.error instanceof SecretRefusal) {
    out.connectionsRefused = connections.error.message;
    out.connectionsRefusedCode = connections.error.code ?? '';
  } else {
    src.onSkipped('connections', connections.error);
  }
  if (!task.ok) {
    src.onSkipped('spec', task.error);
    return out;
  }
  if (wantSpec) out.spec = create(GetTaskSpecResponseSchema, { spec: task.value.spec });
  const rows = await settle(
    Promise.all(task.value.dependsOn.map((u) => src.xcom(task.value.dagRunId, u))),
  );
  if (!rows.ok) {
    src.onSkipped('xcoms', rows.error);
    return out;
  }
  out.xcoms = create(PrefetchedXComsSchema, {
    upstreams: task.value.dependsOn.map((upstreamTaskId, i) => {
      const row = rows.value[i];
      return {
        upstreamTaskId,
        xcom: create(
          FetchXComResponseSchema,
          row ? { found: true, value: row.value, contentType: row.content_type } : { found: false },
        ),
      };
    }),
  });
  return out;
}

type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown };

async function settle<T>(p: Promise<T>): Promise<Settled<T>> {
  try {
    return { ok: true, value: await p };
  } catch (error) {
    return { ok: false, error };
  }
}
