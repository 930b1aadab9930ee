import { describe, expect, it } from 'vitest';
import { leoflowFor, VECTORS } from './vectors.js';

/**
 * The regression vectors the Airflow differential test found (test/oracle/airflow-vectors.json),
 * replayed against Leoflow alone: no Python needed, so they hold on every machine. The
 * differential test replays them against Airflow 3.3.2 too.
 */
describe('Airflow regression vectors (Leoflow side)', () => {
  it('there are vectors, each with a note on where it came from', () => {
    expect(VECTORS.length).toBeGreaterThan(10);
    for (const v of VECTORS) expect(v.note.length).toBeGreaterThan(10);
  });

  it.each(VECTORS.map((v, i) => [i, v.kind, v] as const))('#%i %s', (_i, _kind, v) => {
    expect(leoflowFor(v)).toEqual(v.leoflow);
  });
});
