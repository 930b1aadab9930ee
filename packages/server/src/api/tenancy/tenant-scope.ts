import {
  dagSpecHash,
  declaredUnion,
  grantMatcher,
  parseGrants,
  type SecretGrants,
  VaultError,
  LeoflowError,
  type Clock,
  type DagRunState,
  type DagSpec,
  DagError,
  AuthError,
} from '@leoflow/core';
import { checkDeclarations, checkExecutorChoices } from '../../scheduler/dags/registration.js';
import { type ExecutorPolicy } from '../../executor/executor-policy.js';
import type { RevocationRequest, RevocationResult } from '../../attempts/revocation.js';
import type { MarkInput, RunOperations, TriggerInput } from '../../scheduler/run-operations.js';
import type { ApiTokenStore } from '../../store/ports/api-tokens.js';
import type { AttemptRecordStore } from '../../store/ports/attempt-records.js';
import type { SecretGrantKind, SecretGrantStore } from '../../store/ports/secret-grants.js';
import type { AuditStore } from '../../store/ports/audit.js';
import type { ConnectionStore } from '../../store/ports/connections.js';
import type { DagStore } from '../../store/ports/dags.js';
import type { LogStore } from '../../store/ports/logs.js';
import type { RunStore } from '../../store/ports/runs.js';
import type { TaskInstanceStore } from '../../store/ports/task-instances.js';
import type { VariableStore } from '../../store/ports/variables.js';
import type { XComStore } from '../../store/ports/xcom.js';
import type {
  ApiTokenRow,
  DagImportErrorRow,
  DagRow,
  DagRunRow,
  DagVersionRow,
  LogLineRow,
  Page,
  TaskInstanceHistoryRow,
  TaskInstanceRow,
  XComRow,
  AttemptRecordRow,
  UndeclaredUseSummary,
} from '../../store/types.js';
import type { AuditRecord } from '../../store/vault-types.js';
import type { VaultService } from '../../vault/vault-service.js';

/** Vault operations with the tenant already applied: the caller has no tenant argument to get wrong. */
type TenantBound<T, K extends keyof T> = {
  [P in K]: T[P] extends (tenant_id: string, ...rest: infer A) => infer R
    ? (...rest: A) => R
    : never;
};

export type TenantVault = TenantBound<
  VaultService,
  | 'setVariable'
  | 'getVariable'
  | 'listVariables'
  | 'deleteVariable'
  | 'resolveVariables'
  | 'setConnection'
  | 'getConnection'
  | 'listConnections'
  | 'deleteConnection'
  | 'resolveConnections'
>;

export type RevokeCredential = (request: RevocationRequest) => Promise<RevocationResult>;

/**
 * What a tenant's scope reads and writes in the store directly (vault values go through the
 * VaultService; variables and connections here only for the registration-time existence check).
 * Not tenants, sealed values, attempt credentials or the lifecycle.
 */
export type TenantScopeStore = DagStore &
  RunStore &
  TaskInstanceStore &
  AttemptRecordStore &
  XComStore &
  LogStore &
  ApiTokenStore &
  AuditStore &
  VariableStore &
  ConnectionStore &
  SecretGrantStore;

export interface TenantScopeDeps {
  store: TenantScopeStore;
  vault: VaultService;
  runs: RunOperations;
  clock: Clock;
  revoke: RevokeCredential;
  /** the executors and Kubernetes allowlists registration checks tasks against; absent = not checked (tests) */
  executorPolicy?: ExecutorPolicy;
  /** dags.paused_at_creation (boot passes the setting; absent = false, for tests) */
  pausedAtCreation?: boolean;
}

/** A secret's grants and who declares it (GET …/grants). */
export interface SecretGrantsView {
  kind: SecretGrantKind;
  name: string;
  grants: SecretGrants;
  /** registered DAGs whose current version declares it, and whether its grants name them */
  declared_by: { dag_id: string; granted: boolean }[];
}

/** What a grants edit changed (PUT …/grants). */
export interface SecretGrantChange {
  kind: SecretGrantKind;
  name: string;
  grants: SecretGrants;
  previous: SecretGrants;
  /** false for a dry run (nothing written) */
  applied: boolean;
  /** registered DAGs that declare it and lose it with this change (delivery then refuses it) */
  losing: string[];
  /** registered DAGs that declare it and gain it */
  gaining: string[];
  /** every registered DAG that declares it, under the new grants */
  declared_by: { dag_id: string; granted: boolean }[];
}

function secretNotFound(kind: SecretGrantKind, name: string): LeoflowError {
  return kind === 'variables'
    ? new VaultError(
        'LF_VARIABLE_NOT_FOUND',
        `no variable "${name}"; see \`leoflow variables list\``,
      )
    : new VaultError(
        'LF_CONNECTION_NOT_FOUND',
        `no connection "${name}"; see \`leoflow connections list\``,
      );
}

export interface AuditEntry {
  actor: string;
  action: string;
  resource: { type: string; id: string };
  request_id: string | null;
  payload?: Record<string, unknown>;
}

/**
 * Everything a request may read or change, already narrowed to one tenant. Request handlers get
 * one of these and no store: there is no method that takes a tenant id, and every lookup that
 * starts from a run or task goes through the tenant's (dag_id, run_id) first, so an object of
 * another tenant is simply not found (404, existence not revealed).
 */
export class TenantScope {
  readonly vault: TenantVault;

  constructor(
    readonly tenantId: string,
    private readonly deps: TenantScopeDeps,
  ) {
    const v = deps.vault;
    const t = tenantId;
    type P<K extends keyof TenantVault> = Parameters<TenantVault[K]>;
    this.vault = {
      setVariable: (...a: P<'setVariable'>) => v.setVariable(t, ...a),
      getVariable: (...a: P<'getVariable'>) => v.getVariable(t, ...a),
      listVariables: (...a: P<'listVariables'>) => v.listVariables(t, ...a),
      deleteVariable: (...a: P<'deleteVariable'>) => v.deleteVariable(t, ...a),
      resolveVariables: (...a: P<'resolveVariables'>) => v.resolveVariables(t, ...a),
      setConnection: (...a: P<'setConnection'>) => v.setConnection(t, ...a),
      getConnection: (...a: P<'getConnection'>) => v.getConnection(t, ...a),
      listConnections: (...a: P<'listConnections'>) => v.listConnections(t, ...a),
      deleteConnection: (...a: P<'deleteConnection'>) => v.deleteConnection(t, ...a),
      resolveConnections: (...a: P<'resolveConnections'>) => v.resolveConnections(t, ...a),
    };
  }

  // ------------------------------------------------------------------ dags

  listDags(page: Page): Promise<DagRow[]> {
    return this.deps.store.listDags(this.tenantId, page);
  }

  async getDag(dagId: string): Promise<DagRow> {
    const dag = await this.deps.store.getDag(this.tenantId, dagId);
    if (!dag) {
      throw new DagError('LF_DAG_NOT_FOUND', `no DAG "${dagId}"; see \`leoflow dags list\``);
    }
    return dag;
  }

  async getDagVersion(dagId: string, version: number): Promise<DagVersionRow> {
    const v = await this.deps.store.getDagVersion(this.tenantId, dagId, version);
    if (!v) {
      throw new DagError(
        'LF_DAG_VERSION_NOT_FOUND',
        `DAG ${dagId} has no version ${version}; its versions are listed by GET /api/v1/dags/${dagId}/versions (the web app's Versions page)`,
      );
    }
    return v;
  }

  async listDagVersions(dagId: string): Promise<Omit<DagVersionRow, 'spec'>[]> {
    await this.getDag(dagId);
    return this.deps.store.listDagVersions(this.tenantId, dagId);
  }

  async registerDag(spec: DagSpec): Promise<{ version: number; created: boolean }> {
    if (this.deps.executorPolicy)
      checkExecutorChoices(this.deps.executorPolicy, this.tenantId, spec);
    await checkDeclarations(this.deps.store, this.tenantId, spec);
    return this.deps.store.putDagVersion(
      this.tenantId,
      spec,
      dagSpecHash(spec),
      this.deps.clock.now(),
      { pausedAtCreation: this.deps.pausedAtCreation === true, sourceFile: null },
    );
  }

  listDagImportErrors(): Promise<DagImportErrorRow[]> {
    return this.deps.store.listDagImportErrors(this.tenantId);
  }

  async setDagPaused(dagId: string, paused: boolean): Promise<DagRow> {
    await this.getDag(dagId);
    await this.deps.store.setDagPaused(this.tenantId, dagId, paused, this.deps.clock.now());
    return this.getDag(dagId);
  }

  // ------------------------------------------------------------------ runs

  triggerRun(dagId: string, input: TriggerInput): Promise<DagRunRow> {
    return this.deps.runs.trigger(this.tenantId, dagId, input);
  }

  listRuns(
    filter: { dag_id?: string; state?: DagRunState; run_id?: string },
    page: Page,
  ): Promise<DagRunRow[]> {
    return this.deps.store.listRuns(this.tenantId, filter, page);
  }

  async getRun(dagId: string, runId: string): Promise<DagRunRow> {
    const run = await this.deps.store.getRun(this.tenantId, dagId, runId);
    if (!run) {
      throw new LeoflowError(
        'LF_RUN_NOT_FOUND',
        `DAG ${dagId} has no run "${runId}"; see \`leoflow runs list --dag ${dagId}\``,
      );
    }
    return run;
  }

  clearRun(
    dagId: string,
    runId: string,
    opts: { taskIds: string[] | null; downstream: boolean },
  ): Promise<{ run: DagRunRow; cleared: string[] }> {
    return this.deps.runs.clear(this.tenantId, dagId, runId, opts);
  }

  /**
   * Mark success / failed (tasks with their downstream/upstream, or the whole run): a live
   * attempt of a marked task instance is stopped and its credential revoked first.
   */
  markRun(
    dagId: string,
    runId: string,
    input: MarkInput,
  ): Promise<{ run: DagRunRow; marked: string[] }> {
    return this.deps.runs.mark(this.tenantId, dagId, runId, input, async (ti) => {
      await this.deps.revoke({ taskInstance: ti, terminate: true });
    });
  }

  /** The run's task instances in the DAG's declaration (dependency) order. */
  async listTaskInstances(
    dagId: string,
    runId: string,
  ): Promise<{ run: DagRunRow; taskInstances: TaskInstanceRow[] }> {
    const run = await this.getRun(dagId, runId);
    const tis = await this.deps.store.listTaskInstances(run.id);
    const version = await this.deps.store.getDagVersion(this.tenantId, dagId, run.dag_version);
    const order = new Map((version?.spec.tasks ?? []).map((t, i) => [t.task_id, i]));
    tis.sort((a, b) => (order.get(a.task_id) ?? Infinity) - (order.get(b.task_id) ?? Infinity));
    return { run, taskInstances: tis };
  }

  /**
   * The grid: a DAG's newest runs (newest first) with their task instances, in two queries
   * whatever the number of runs.
   */
  async grid(
    dagId: string,
    limit: number,
  ): Promise<{ runs: DagRunRow[]; taskInstances: Map<string, TaskInstanceRow[]> }> {
    await this.getDag(dagId);
    const runs = await this.deps.store.listRuns(
      this.tenantId,
      { dag_id: dagId },
      { limit, offset: 0 },
    );
    const tis = await this.deps.store.listTaskInstancesOfRuns(runs.map((r) => r.id));
    const byRun = new Map<string, TaskInstanceRow[]>(runs.map((r) => [r.id, []]));
    for (const ti of tis) byRun.get(ti.dag_run_id)?.push(ti);
    return { runs, taskInstances: byRun };
  }

  /**
   * One task instance: (run, task, map index). Without a map index, the task's one instance — a
   * mapped task that expanded has several, and then the map index must be named
   * (LF_MAP_INDEX_REQUIRED, listing how many there are).
   */
  async getTaskInstance(
    dagId: string,
    runId: string,
    taskId: string,
    mapIndex?: number,
  ): Promise<{ run: DagRunRow; taskInstance: TaskInstanceRow }> {
    const run = await this.getRun(dagId, runId);
    const ti = await this.deps.store.getTaskInstance(run.id, taskId, mapIndex ?? -1);
    if (!ti) {
      const mapped = (await this.deps.store.listTaskInstances(run.id)).filter(
        (t) => t.task_id === taskId && t.map_index >= 0,
      );
      if (mapped.length > 0 && mapIndex === undefined) {
        throw new LeoflowError(
          'LF_MAP_INDEX_REQUIRED',
          `task "${taskId}" of run ${runId} is mapped into ${mapped.length} task instances (map indexes 0-${mapped.length - 1}); name one with --map-index N (REST: ?map_index=N), or list them with \`leoflow tasks mapped ${runId} ${taskId}\``,
        );
      }
      throw new LeoflowError(
        'LF_TASK_NOT_FOUND',
        mapIndex !== undefined && mapIndex >= 0
          ? `run ${runId} has no map index ${mapIndex} of task "${taskId}"${mapped.length > 0 ? ` (it has 0-${mapped.length - 1})` : ' (it is not mapped)'}`
          : `run ${runId} has no task "${taskId}"; see \`leoflow runs show ${runId}\``,
      );
    }
    return { run, taskInstance: ti };
  }

  /** Every map index of a mapped task (its unexpanded instance, before it expanded), in order. */
  async mappedInstances(
    dagId: string,
    runId: string,
    taskId: string,
  ): Promise<{ run: DagRunRow; taskInstances: TaskInstanceRow[] }> {
    const run = await this.getRun(dagId, runId);
    const tis = (await this.deps.store.listTaskInstances(run.id)).filter(
      (t) => t.task_id === taskId,
    );
    if (tis.length === 0) {
      throw new LeoflowError(
        'LF_TASK_NOT_FOUND',
        `run ${runId} has no task "${taskId}"; see \`leoflow runs show ${runId}\``,
      );
    }
    return { run, taskInstances: tis.sort((a, b) => a.map_index - b.map_index) };
  }

  async taskHistory(
    dagId: string,
    runId: string,
    taskId: string,
    mapIndex?: number,
  ): Promise<{ taskInstance: TaskInstanceRow; history: TaskInstanceHistoryRow[] }> {
    const { run, taskInstance } = await this.getTaskInstance(dagId, runId, taskId, mapIndex);
    const history = await this.deps.store.listTaskInstanceHistory(
      run.id,
      taskId,
      taskInstance.map_index,
    );
    return { taskInstance, history };
  }

  async readLogs(
    dagId: string,
    runId: string,
    taskId: string,
    q: { try?: number; after_line: number; limit: number; map_index?: number },
  ): Promise<{ taskInstance: TaskInstanceRow; tryNumber: number; lines: LogLineRow[] }> {
    const { run, taskInstance } = await this.getTaskInstance(dagId, runId, taskId, q.map_index);
    const tryNumber = q.try ?? taskInstance.try_number;
    const lines = await this.deps.store.readLogs(
      run.id,
      taskId,
      tryNumber,
      q.after_line,
      q.limit,
      taskInstance.map_index,
    );
    return { taskInstance, tryNumber, lines };
  }

  async listXComs(
    dagId: string,
    runId: string,
    taskId: string,
    mapIndex?: number,
  ): Promise<XComRow[]> {
    const { run, taskInstance } = await this.getTaskInstance(dagId, runId, taskId, mapIndex);
    return this.deps.store.listXComs(run.id, taskId, taskInstance.map_index);
  }

  /** The per-try delivery records of one task instance (every try, or one). */
  async attemptRecords(
    dagId: string,
    runId: string,
    taskId: string,
    tryNumber?: number,
    mapIndex?: number,
  ): Promise<{ taskInstance: TaskInstanceRow; records: AttemptRecordRow[] }> {
    const { run, taskInstance } = await this.getTaskInstance(dagId, runId, taskId, mapIndex);
    const all = await this.deps.store.listAttemptRecords(run.id, taskId);
    const records = all.filter(
      (r) =>
        r.tenant_id === this.tenantId &&
        r.map_index === taskInstance.map_index &&
        (tryNumber === undefined || r.try_number === tryNumber),
    );
    return { taskInstance, records };
  }

  /** D5: per DAG, the names tasks read through the SDK without declaring them. */
  async undeclaredUse(dagId?: string): Promise<UndeclaredUseSummary[]> {
    if (dagId !== undefined) await this.getDag(dagId);
    return this.deps.store.summarizeUndeclaredUse(this.tenantId, dagId);
  }

  // ------------------------------------------------------------------ secret grants

  /**
   * A secret's grants (null: every DAG) and the registered DAGs whose current version declares
   * it, each with whether the grants name it.
   */
  async secretGrants(kind: SecretGrantKind, name: string): Promise<SecretGrantsView> {
    const grants = (await this.deps.store.getSecretGrants(this.tenantId, kind, [name])).get(name);
    if (grants === undefined) throw secretNotFound(kind, name);
    const matches = grantMatcher(grants);
    const declaring = await this.dagsDeclaring(kind, name);
    return {
      kind,
      name,
      grants,
      declared_by: declaring.map((dag_id) => ({ dag_id, granted: matches(dag_id) })),
    };
  }

  /**
   * Replaces a secret's grants (validated: LF_SECRET_GRANT_INVALID, nothing written). The answer
   * lists the registered DAGs that declare it and lose it with this change; `dryRun` writes
   * nothing (the web app's preview before saving). The route audits the change.
   */
  async setSecretGrants(
    kind: SecretGrantKind,
    name: string,
    given: unknown,
    dryRun: boolean,
  ): Promise<SecretGrantChange> {
    const noun = kind === 'variables' ? 'variable' : 'connection';
    const next = parseGrants(given, `${noun} ${name}`);
    const before = await this.secretGrants(kind, name);
    const now = grantMatcher(next);
    const losing = before.declared_by
      .filter((d) => d.granted && !now(d.dag_id))
      .map((d) => d.dag_id);
    const gaining = before.declared_by
      .filter((d) => !d.granted && now(d.dag_id))
      .map((d) => d.dag_id);
    if (!dryRun) {
      const written = await this.deps.store.setSecretGrants(
        this.tenantId,
        kind,
        name,
        next,
        this.deps.clock.now(),
      );
      if (!written) throw secretNotFound(kind, name);
    }
    return {
      kind,
      name,
      grants: next,
      previous: before.grants,
      applied: !dryRun,
      losing,
      gaining,
      declared_by: before.declared_by.map((d) => ({ dag_id: d.dag_id, granted: now(d.dag_id) })),
    };
  }

  /** The tenant's registered DAGs whose current version declares the secret (DAG or a task). */
  private async dagsDeclaring(kind: SecretGrantKind, name: string): Promise<string[]> {
    const out: string[] = [];
    const limit = 500;
    for (let offset = 0; ; offset += limit) {
      const dags = await this.deps.store.listDags(this.tenantId, { limit, offset });
      for (const d of dags) {
        const v = await this.deps.store.getDagVersion(this.tenantId, d.dag_id, d.current_version);
        if (v && declaredUnion(v.spec, kind).includes(name)) out.push(d.dag_id);
      }
      if (dags.length < limit) return out;
    }
  }

  async revokeCredential(input: {
    dagId: string;
    runId: string;
    taskId: string;
    tryNumber?: number;
    mapIndex?: number;
    terminate: boolean;
  }): Promise<RevocationResult> {
    const { taskInstance } = await this.getTaskInstance(
      input.dagId,
      input.runId,
      input.taskId,
      input.mapIndex,
    );
    return this.deps.revoke({
      taskInstance,
      ...(input.tryNumber !== undefined ? { tryNumber: input.tryNumber } : {}),
      terminate: input.terminate,
    });
  }

  // ------------------------------------------------------------------ audit

  /**
   * Best-effort by design (the caller decides how to log a failure): an audit write never
   * changes the result of the action it records. Payloads carry counts and flags, never values.
   */
  recordAudit(e: AuditEntry): Promise<void> {
    return this.deps.store.appendAudit({
      tenant_id: this.tenantId,
      at: this.deps.clock.now(),
      actor: e.actor,
      action: e.action,
      resource_type: e.resource.type,
      resource_id: e.resource.id,
      request_id: e.request_id,
      payload: e.payload ?? {},
    });
  }

  listAudit(filter: { since?: number; action?: string }, page: Page): Promise<AuditRecord[]> {
    return this.deps.store.listAudit(this.tenantId, filter, page);
  }

  // ------------------------------------------------------------------ tokens

  listTokens(
    filter: { include_revoked?: boolean; name?: string },
    page: Page,
  ): Promise<ApiTokenRow[]> {
    return this.deps.store.listApiTokens(this.tenantId, filter, page);
  }

  async revokeToken(jti: string, by: string): Promise<ApiTokenRow> {
    const now = this.deps.clock.now();
    const revoked = await this.deps.store.revokeApiToken(this.tenantId, jti, by, now);
    const row = revoked ? await this.deps.store.getApiToken(jti) : undefined;
    if (!row) {
      // The reference is not echoed: someone may have pasted a token itself here.
      throw new AuthError(
        'LF_TOKEN_NOT_FOUND',
        'no active token with that id in this tenant; revoke by the id or name that `leoflow auth list-tokens` shows',
      );
    }
    return row;
  }
}

/** Builds the scope for a principal's tenant; the only way request handlers reach data. */
export class TenantScopes {
  // A scope holds no per-request state, so one per tenant serves every request of that tenant.
  readonly #byTenant = new Map<string, TenantScope>();

  constructor(private readonly deps: TenantScopeDeps) {}

  forTenant(tenantId: string): TenantScope {
    let scope = this.#byTenant.get(tenantId);
    if (!scope) {
      scope = new TenantScope(tenantId, this.deps);
      this.#byTenant.set(tenantId, scope);
    }
    return scope;
  }
}
