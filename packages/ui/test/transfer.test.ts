import { describe, expect, it } from 'vitest';
import {
  connectionsAsAirflowJson,
  connectionsWithoutSecrets,
  importEach,
  variablesWithoutSecrets,
} from '../src/transfer';

describe('exports without the reveal permission', () => {
  it('a Variables file carries what the list shows and no masked value', () => {
    const out = variablesWithoutSecrets([
      { key: 'region', value: 'eu', masked: false },
      { key: 'limits', value: { n: 1 }, masked: false },
      { key: 'api_key', value: '***', masked: true },
    ]);
    expect(out.doc).toEqual({ region: 'eu', limits: '{"n":1}' });
    expect(out.omitted).toEqual(['api_key']);
  });

  it('a Connections file has no password and no extra', () => {
    const doc = connectionsWithoutSecrets([
      {
        conn_id: 'db',
        conn_type: 'postgres',
        host: 'h',
        login: 'u',
        schema: 's',
        port: 5432,
        description: 'd',
      },
    ]);
    expect(doc).toEqual({
      db: {
        conn_type: 'postgres',
        description: 'd',
        host: 'h',
        login: 'u',
        password: null,
        schema: 's',
        port: 5432,
        extra: null,
      },
    });
  });

  it('the full export is written as Airflow does: extra as a JSON string', () => {
    expect(
      connectionsAsAirflowJson({
        a: { conn_type: 'http', extra: { k: 1 } },
        b: { conn_type: 'http', extra: null },
      }),
    ).toEqual({
      a: { conn_type: 'http', extra: '{"k":1}' },
      b: { conn_type: 'http', extra: null },
    });
  });
});

describe('importEach', () => {
  it('goes on after a refusal and reports every item, in order, with the server code', async () => {
    const seen: number[] = [];
    const out = await importEach(
      ['a', 'b', 'c'],
      (x) => x,
      (x) =>
        x === 'b'
          ? Promise.reject(Object.assign(new Error('no such tenant'), { code: 'LF_X' }))
          : Promise.resolve(),
      (o) => seen.push(o.length),
    );
    expect(out).toEqual([
      { name: 'a', ok: true, message: 'imported' },
      { name: 'b', ok: false, message: 'no such tenant (LF_X)' },
      { name: 'c', ok: true, message: 'imported' },
    ]);
    expect(seen).toEqual([1, 2, 3]);
  });
});
