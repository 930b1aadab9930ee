import { mappableList, mappedConsumersLimit, type DagSpec } from '@leoflow/core';
import type { XComStore } from '../store/ports/xcom.js';

/** The most a reduce (every map index's return value, as one list) may hand a task. */
export const MAX_REDUCED_XCOM_BYTES = 2 * 1024 * 1024;

export interface UpstreamValue {
  value: Uint8Array;
  content_type: string;
}

export class ReducedXComTooLarge extends Error {}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * What a task reads of an upstream's XCom `key`: the value itself, or — for a mapped upstream —
 * the values of its map indexes as one JSON list in map-index order (Airflow's reduce over a
 * mapped task's output). A value that is JSON enters the list as that JSON; any other text as a
 * string; a map index that pushed nothing is left out, as Airflow's lazy sequence leaves it out.
 */
export async function readUpstreamXCom(
  store: Pick<XComStore, 'getXCom' | 'listMappedXComs'>,
  spec: DagSpec,
  dagRunId: string,
  upstream: string,
  key: string,
): Promise<UpstreamValue | undefined> {
  const task = spec.tasks.find((t) => t.task_id === upstream);
  if (task?.expand === undefined) {
    const row = await store.getXCom(dagRunId, upstream, key);
    return row && { value: row.value, content_type: row.content_type };
  }
  const rows = await store.listMappedXComs(dagRunId, upstream, key);
  const items: string[] = [];
  let size = 2;
  for (const r of rows) {
    let text: string;
    try {
      text = utf8.decode(r.value);
    } catch {
      text = Buffer.from(r.value).toString('base64');
    }
    let item: string;
    try {
      JSON.parse(text);
      item = text.trim();
    } catch {
      item = JSON.stringify(text);
    }
    size += item.length + 1;
    if (size > MAX_REDUCED_XCOM_BYTES) {
      throw new ReducedXComTooLarge(
        `the return values of the ${rows.length} map indexes of "${upstream}" exceed ${MAX_REDUCED_XCOM_BYTES} bytes together; a task reading them as one list gets at most that`,
      );
    }
    items.push(item);
  }
  return {
    value: new TextEncoder().encode(`[${items.join(',')}]`),
    content_type: 'application/json',
  };
}

/**
 * Why a return value cannot be pushed, when a task maps over it (Airflow fails the pushing task
 * with UnmappableXComTypePushed / UnmappableXComLengthPushed): it must be a JSON list no longer
 * than the tightest max_map_length of the tasks mapping over it. Undefined when it may be pushed
 * (no task maps over it, or it fits). A mapped pusher's values are collected per map index, so
 * each one is a single element and is not checked.
 */
export function unmappableReason(
  spec: DagSpec,
  taskId: string,
  value: Uint8Array,
): string | undefined {
  const limit = mappedConsumersLimit(spec, taskId);
  if (limit === undefined) return undefined;
  if (spec.tasks.find((t) => t.task_id === taskId)?.expand !== undefined) return undefined;
  let text: string;
  try {
    text = utf8.decode(value);
  } catch {
    text = '';
  }
  const check = mappableList(text, limit, taskId);
  return check.ok ? undefined : `${check.code}: ${check.message}`;
}
