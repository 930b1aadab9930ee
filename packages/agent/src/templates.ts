import {
  renderTemplate,
  templateConnectionFromUri,
  templateScope,
  type RunContextInput,
  type TemplateConnection,
  type TemplateScope,
} from '@leoflow/core';
import { TaskType, type TaskSpec } from '@leoflow/protocol';

/** The run context of one attempt, as core's template and environment code reads it. */
export function runContextOf(
  spec: Pick<
    TaskSpec,
    | 'dagId'
    | 'runId'
    | 'taskId'
    | 'tryNumber'
    | 'mapIndex'
    | 'logicalDate'
    | 'dataIntervalStart'
    | 'dataIntervalEnd'
    | 'paramsJson'
    | 'confJson'
  > &
    Partial<
      Pick<TaskSpec, 'runType' | 'prevDataIntervalStartSuccess' | 'prevDataIntervalEndSuccess'>
    >,
): RunContextInput {
  return {
    dagId: spec.dagId,
    runId: spec.runId,
    taskId: spec.taskId,
    tryNumber: spec.tryNumber,
    mapIndex: spec.mapIndex,
    runType: spec.runType ?? '',
    logicalDate: spec.logicalDate || null,
    dataIntervalStart: spec.dataIntervalStart || null,
    dataIntervalEnd: spec.dataIntervalEnd || null,
    prevDataIntervalStartSuccess: spec.prevDataIntervalStartSuccess ?? null,
    prevDataIntervalEndSuccess: spec.prevDataIntervalEndSuccess ?? null,
    conf: jsonObject(spec.confJson),
    params: jsonObject(spec.paramsJson),
  };
}

function jsonObject(text: string): Record<string, unknown> {
  if (text === '') return {};
  try {
    const v = JSON.parse(text) as unknown;
    return v !== null && typeof v === 'object' && !Array.isArray(v)
      ? (v as Record<string, unknown>)
      : {};
  } catch {
    return {};
  }
}

export class TemplateRenderError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Renders a templated spec's bash command and env values from the run context and the
 * attempt's delivered secrets (only those: a template cannot reach a name the attempt was not
 * given). A spec compiled before templates existed (templated false) is returned as is. The
 * message names where and what, never a value.
 */
export function renderSpecTemplates(
  spec: TaskSpec,
  variables: Record<string, string> | undefined,
  connections: Record<string, string> | undefined,
): { command: string; env: Record<string, string> } {
  if (!spec.templated) return { command: spec.command, env: spec.env };
  const conns: Record<string, TemplateConnection> = {};
  for (const [id, v] of Object.entries(connections ?? {})) {
    const c = templateConnectionFromUri(id, v);
    if (c) conns[id] = c;
  }
  const scope: TemplateScope = templateScope(runContextOf(spec), variables ?? {}, conns);
  const render = (where: string, text: string): string => {
    const r = renderTemplate(text, scope);
    if (r.ok) return r.text;
    const before = text.slice(0, r.problem.offset).split('\n');
    throw new TemplateRenderError(
      r.problem.code,
      `template error in ${where} at ${before.length}:${before[before.length - 1]!.length + 1} ` +
        `(${r.problem.code}): ${r.problem.message}; ${r.problem.hint}`,
    );
  };
  const command = spec.type === TaskType.BASH ? render('command', spec.command) : spec.command;
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(spec.env)) env[k] = render(`env ${k}`, v);
  return { command, env };
}
