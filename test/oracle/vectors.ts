import { readFileSync } from 'node:fs';
import {
  formatAirflowConnectionsExport,
  formatConnectionUri,
  parseAirflowConnectionsExport,
  parseConnectionJson,
  parseConnectionUri,
  type Connection,
} from '@leoflow/core';
import { getConnection } from '@leoflow/sdk';
import type { AirflowOracle } from '../support/airflow-oracle.js';

/** The committed regression vectors (test/oracle/airflow-vectors.json). */
export interface Vector {
  kind: 'uri-read' | 'uri-write' | 'json-read' | 'task-read' | 'export' | 'file-import';
  input: unknown;
  leoflow: unknown;
  airflow_3_3_2: unknown;
  divergence: string | null;
  note: string;
  found: string;
}

export const VECTORS: Vector[] = (
  JSON.parse(readFileSync(new URL('./airflow-vectors.json', import.meta.url), 'utf8')) as {
    vectors: Vector[];
  }
).vectors;

function tryIt(fn: () => unknown): unknown {
  try {
    return fn();
  } catch (e) {
    const d = (e as { details?: { problem?: unknown } }).details;
    return { error: typeof d?.problem === 'string' ? d.problem : (e as Error).message };
  }
}

/** What Leoflow gives for a vector's input, in the vector's `leoflow` shape. */
export function leoflowFor(v: Vector): unknown {
  switch (v.kind) {
    case 'uri-read':
      return tryIt(() => parseConnectionUri(v.input as string));
    case 'uri-write':
      return tryIt(() => formatConnectionUri(v.input as Connection));
    case 'json-read':
      return tryIt(() => parseConnectionJson(v.input as string));
    case 'task-read':
      return tryIt(() => {
        const { conn_id: _id, ...conn } = getConnection('oracle_conn', {
          env: { AIRFLOW_CONN_ORACLE_CONN: v.input as string },
          warn: () => undefined,
        });
        return conn;
      });
    case 'export': {
      const { format, conn } = v.input as { format: 'json' | 'yaml' | 'env'; conn: Connection };
      return tryIt(() => formatAirflowConnectionsExport({ oracle_conn: conn }, format));
    }
    case 'file-import': {
      const { format, text } = v.input as { format: 'json' | 'yaml' | 'env'; text: string };
      return tryIt(() => parseAirflowConnectionsExport(text, format));
    }
  }
}

type Answer = Record<string, unknown>;
const fields = (side: unknown): unknown =>
  typeof side === 'object' && side !== null && 'fields' in side ? (side as Answer).fields : side;

/** What Airflow gives for a vector's input now, in the vector's `airflow_3_3_2` shape. */
export async function airflowFor(v: Vector, oracle: AirflowOracle): Promise<unknown> {
  switch (v.kind) {
    case 'uri-read':
    case 'json-read': {
      const a =
        v.kind === 'uri-read'
          ? await oracle.ask({ op: 'uri', uri: v.input })
          : await oracle.ask({ op: 'json', text: v.input });
      return { sdk: fields(a.sdk), core: fields(a.core) };
    }
    case 'uri-write': {
      const a = await oracle.ask({ op: 'conn', conn: v.input });
      const sdk = a.sdk as Answer;
      const core = a.core as Answer;
      const reread = sdk.reread as Answer | undefined;
      return {
        sdk_get_uri: sdk.get_uri,
        core_get_uri: core.get_uri,
        core_reads_it_back: reread?.core,
        sdk_reads_it_back: reread?.sdk,
      };
    }
    case 'task-read': {
      const a = await oracle.ask({
        op: 'env',
        kind: 'conn',
        id: 'oracle_conn',
        name: 'AIRFLOW_CONN_ORACLE_CONN',
        value: v.input,
      });
      return { task: a.task };
    }
    case 'export': {
      const text = leoflowFor(v);
      const { format } = v.input as { format: string };
      const a = await oracle.ask({
        op: 'conn_import',
        format,
        text: typeof text === 'string' ? text : '',
      });
      const conns = a.connections as Answer | undefined;
      return { imports_it_as: conns?.oracle_conn ?? a };
    }
    case 'file-import': {
      const a = await oracle.ask({ op: 'conn_import', ...(v.input as Answer) });
      delete a.py_unassigned;
      return a;
    }
  }
}
