import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Connection } from '@leoflow/core';
import {
  AIRFLOW_ORACLE_HOWTO,
  airflowOracleAvailability,
  startAirflowOracle,
  type AirflowOracle,
} from '../support/airflow-oracle.js';
import {
  checkJsonRead,
  checkUriRead,
  checkUriWrite,
  Findings,
  type ConnAnswer,
  type UriAnswer,
} from './compare.js';
import * as gen from './generators.js';

/**
 * Leoflow's connection codec against Apache Airflow 3.3.2 itself (core Connection and the task
 * SDK's), on generated connections. The seed is printed; LEOFLOW_ORACLE_SEED replays one and
 * LEOFLOW_ORACLE_RUNS changes how many cases each property runs. A failing case becomes a
 * fixed vector in packages/core/test/connections/airflow-oracle-vectors.json.
 */

const availability = airflowOracleAvailability();
const SEED = Number(process.env.LEOFLOW_ORACLE_SEED ?? Math.floor(Math.random() * 2 ** 31));
const RUNS = Number(process.env.LEOFLOW_ORACLE_RUNS ?? 800);
if (availability === 'skip') {
  process.stderr.write(
    `Airflow differential tests skipped: no oracle environment; to run them, ${AIRFLOW_ORACLE_HOWTO}\n`,
  );
} else if (availability === 'run') {
  process.stderr.write(
    `Airflow differential tests: seed ${SEED} (replay with LEOFLOW_ORACLE_SEED=${SEED}), ${RUNS} runs per property\n`,
  );
}

let oracle: AirflowOracle;
/** Every deliberate divergence seen, with how often. */
const seen = new Map<string, number>();
let cases = 0;

beforeAll(async () => {
  if (availability !== 'run') return;
  oracle = await startAirflowOracle();
}, 60_000);

afterAll(async () => {
  if (availability !== 'run') return;
  await oracle.close();
  const list = [...seen].sort().map(([k, n]) => `${k} ×${n}`);
  process.stderr.write(
    `Airflow differential: ${cases} cases; deliberate divergences seen: ${list.join(', ') || 'none'}\n`,
  );
  if (process.env.LEOFLOW_ORACLE_EXAMPLES === '1') {
    for (const [k, v] of [...examples].sort((a, b) => (a[0] < b[0] ? -1 : 1)))
      process.stderr.write(`  ${k}: ${JSON.stringify(v)}\n`);
  }
});

/** The first input that showed each divergence (printed with LEOFLOW_ORACLE_EXAMPLES=1). */
const examples = new Map<string, unknown>();

function record(f: Findings, input: unknown): void {
  cases++;
  for (const d of f.divergences) {
    seen.set(d, (seen.get(d) ?? 0) + 1);
    if (!examples.has(d)) examples.set(d, input);
  }
}

function assertClean(f: Findings, input: unknown): void {
  record(f, input);
  if (f.problems.length > 0) {
    throw new Error(`${f.problems.join('\n')}\ninput: ${JSON.stringify(input)}`);
  }
}

const params = (n = RUNS) => ({ seed: SEED, numRuns: n, endOnFailure: false });

async function readUri(uri: string): Promise<UriAnswer> {
  return (await oracle.ask({ op: 'uri', uri })) as unknown as UriAnswer;
}

async function checkConnection(c: Connection & { description?: string | null }): Promise<Findings> {
  const f = new Findings();
  const answer = (await oracle.ask({ op: 'conn', conn: c })) as unknown as ConnAnswer;
  let oursRead: UriAnswer | null = null;
  try {
    const { formatConnectionUri } = await import('@leoflow/core');
    oursRead = await readUri(formatConnectionUri(c));
  } catch {
    oursRead = null;
  }
  checkUriWrite(c, answer, oursRead, f);
  return f;
}

describe.runIf(availability === 'missing')('Airflow differential (oracle missing)', () => {
  it('requires the oracle environment (CI=true or LEOFLOW_TEST_REQUIRE_AIRFLOW=1)', () => {
    throw new Error(
      `the Airflow oracle environment is required but missing; to fix: ${AIRFLOW_ORACLE_HOWTO}`,
    );
  });
});

describe.runIf(availability === 'run')('Leoflow vs Airflow 3.3.2: connections', () => {
  it('reads a URI as the task SDK reads it (and as core does, query values aside)', async () => {
    await fc.assert(
      fc.asyncProperty(gen.uri, async (uri) => {
        const f = new Findings();
        checkUriRead(uri, await readUri(uri), f);
        assertClean(f, uri);
      }),
      params(),
    );
  });

  it('writes a connection as get_uri does, or else so that both classes read it back', async () => {
    await fc.assert(
      fc.asyncProperty(gen.connection, async (c) => {
        assertClean(await checkConnection(c), c);
      }),
      params(),
    );
  });

  it('re-delivers what it read from a URI so that both classes read the same connection', async () => {
    await fc.assert(
      fc.asyncProperty(gen.uri, async (uri) => {
        const f = new Findings();
        const ours = checkUriRead(uri, await readUri(uri), f);
        if (ours !== null) {
          const g = await checkConnection(ours);
          f.problems.push(...g.problems);
          for (const d of g.divergences) f.diverge(d);
        }
        assertClean(f, uri);
      }),
      params(Math.ceil(RUNS / 2)),
    );
  });

  it('reads the JSON form as from_json does', async () => {
    await fc.assert(
      fc.asyncProperty(gen.connectionJson, async (text) => {
        const f = new Findings();
        checkJsonRead(text, (await oracle.ask({ op: 'json', text })) as unknown as UriAnswer, f);
        assertClean(f, text);
      }),
      params(),
    );
  });
});

// Keeps `expect` in use for type-only runs of this file.
void expect;
