import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  connectionEnvName,
  formatAirflowConnectionsExport,
  formatAirflowVariablesExport,
  parseAirflowConnectionsExport,
  parseAirflowVariablesExport,
  variableEnvName,
  type Connection,
} from '@leoflow/core';
import { getConnection } from '@leoflow/sdk';
import {
  AIRFLOW_ORACLE_HOWTO,
  airflowOracleAvailability,
  startAirflowOracle,
  type AirflowOracle,
} from '../support/airflow-oracle.js';
import {
  checkConnectionsImport,
  checkConnId,
  checkEnvName,
  checkJsonRead,
  checkTaskRead,
  checkUriRead,
  checkUriWrite,
  checkVariablesImport,
  failed,
  Findings,
  type ConnAnswer,
  type EnvAnswer,
  type UriAnswer,
} from './compare.js';
import * as gen from './generators.js';
import { airflowFor, VECTORS } from './vectors.js';

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
/** fast-check runs with shrinking; on a loaded machine that can take a while. */
const TIMEOUT = 300_000;

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

describe.runIf(availability === 'run')('Leoflow vs Airflow 3.3.2: the regression vectors', () => {
  it('Airflow still answers each committed vector as recorded', async () => {
    for (const v of VECTORS) {
      expect(await airflowFor(v, oracle), `${v.kind} ${JSON.stringify(v.input)}`).toEqual(
        v.airflow_3_3_2,
      );
    }
  });
});

describe.runIf(availability === 'run')(
  'Leoflow vs Airflow 3.3.2: connections',
  { timeout: TIMEOUT },
  () => {
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
  },
);

function attempt<T>(fn: () => T): T | Error {
  try {
    return fn();
  } catch (e) {
    return e instanceof Error ? e : new Error(String(e));
  }
}

const ORACLE_CONN = 'oracle_conn';

function withoutId<T extends { conn_id: string }>(c: T): Omit<T, 'conn_id'> {
  const { conn_id: _id, ...rest } = c;
  return rest;
}

describe.runIf(availability === 'run')(
  'Leoflow vs Airflow 3.3.2: what a task reads, env names, exports',
  { timeout: TIMEOUT },
  () => {
    it("a task's getConnection reads AIRFLOW_CONN_* as a task on Airflow reads it", async () => {
      await fc.assert(
        fc.asyncProperty(gen.envValue, async (value) => {
          const f = new Findings();
          const answer = (await oracle.ask({
            op: 'env',
            kind: 'conn',
            id: ORACLE_CONN,
            name: connectionEnvName(ORACLE_CONN),
            value,
          })) as unknown as EnvAnswer;
          const ours = attempt(() =>
            getConnection(ORACLE_CONN, {
              env: { [connectionEnvName(ORACLE_CONN)]: value },
              warn: () => undefined,
            }),
          );
          checkTaskRead(value, ours instanceof Error ? ours : withoutId(ours), answer, f);
          assertClean(f, value);
        }),
        params(),
      );
    });

    it('AIRFLOW_CONN_<ID> and AIRFLOW_VAR_<KEY> are the names Airflow looks up; ids are valid where Airflow’s are', async () => {
      await fc.assert(
        fc.asyncProperty(
          gen.secretName,
          fc.constantFrom('conn' as const, 'var' as const),
          async (id, kind) => {
            const f = new Findings();
            const ours = attempt(() =>
              kind === 'conn' ? connectionEnvName(id) : variableEnvName(id),
            );
            const answer =
              ours instanceof Error
                ? null
                : ((await oracle.ask({
                    op: 'env',
                    kind,
                    id,
                    name: ours,
                    value: 'generic://oracle-value',
                  })) as unknown as EnvAnswer);
            checkEnvName(kind, id, ours, answer, f);
            if (kind === 'conn') {
              const ids = (await oracle.ask({ op: 'conn_ids', ids: [id] })) as {
                sanitized: (string | null)[];
                py_unassigned?: string[];
              };
              const imported = attempt(() =>
                parseAirflowConnectionsExport(
                  JSON.stringify({ [id]: { conn_type: 'generic' } }),
                  'json',
                ),
              );
              const valid = !(
                imported instanceof Error &&
                /connection id is not valid|id is empty/.test(imported.message)
              );
              checkConnId(id, valid, ids.sanitized[0] ?? null, ids, f);
            }
            assertClean(f, { id, kind });
          },
        ),
        params(),
      );
    });

    it('`airflow connections export` files: JSON byte for byte, and Airflow imports each Leoflow file as the same connections', async () => {
      await fc.assert(
        // A Leoflow connection always has a type (the vault requires one).
        fc.asyncProperty(
          gen.connection.filter((c) => c.conn_type !== ''),
          async (withDescription) => {
            const f = new Findings();
            // Leoflow's export carries no description.
            const c = { ...withDescription, description: null };
            const conns = { [ORACLE_CONN]: c };
            const answer = (await oracle.ask({ op: 'conn', conn: c })) as unknown as ConnAnswer;
            const json = attempt(() => formatAirflowConnectionsExport(conns, 'json'));
            const airflowJson = answer.export?.json;
            if (
              !(json instanceof Error) &&
              typeof airflowJson === 'string' &&
              json !== airflowJson
            ) {
              f.problem(`export json:\nLeoflow ${json}\nAirflow ${airflowJson}`);
            }
            for (const format of ['json', 'yaml', 'env'] as const) {
              const text = attempt(() => formatAirflowConnectionsExport(conns, format));
              if (text instanceof Error) continue; // formatConnectionUri refused: checked above
              const theirs = (await oracle.ask({ op: 'conn_import', format, text })) as {
                connections?: Record<string, never>;
                error?: string;
              };
              const ours = attempt(() => parseAirflowConnectionsExport(text, format));
              checkConnectionsImport(format, text, ours, theirs, f);
            }
            // And what Airflow's own export of the same connection holds, read by Leoflow: the
            // JSON file as `connections import` reads it; the env file's URI as either class
            // reads it (a URI Airflow writes but misreads itself is judged as any other URI).
            if (typeof airflowJson === 'string') {
              const theirs = (await oracle.ask({
                op: 'conn_import',
                format: 'json',
                text: airflowJson,
              })) as {
                error?: string;
              };
              checkConnectionsImport(
                'json',
                airflowJson,
                attempt(() => parseAirflowConnectionsExport(airflowJson, 'json')),
                theirs,
                f,
              );
            }
            const env = answer.export?.env_uri;
            if (typeof env === 'string' && !failed(answer.core)) {
              checkUriRead(
                env.slice(ORACLE_CONN.length + 1).replace(/\n$/, ''),
                await readUri(env.slice(ORACLE_CONN.length + 1).replace(/\n$/, '')),
                f,
              );
            }
            assertClean(f, c);
          },
        ),
        params(Math.ceil(RUNS / 2)),
      );
    });

    it('`airflow variables import` stores what Leoflow’s variables import stores', async () => {
      await fc.assert(
        fc.asyncProperty(gen.variablesFile, async (text) => {
          const f = new Findings();
          const answer = (await oracle.ask({ op: 'var_import', text })) as never;
          checkVariablesImport(
            attempt(() => parseAirflowVariablesExport(text)),
            answer,
            f,
          );
          assertClean(f, text);
        }),
        params(Math.ceil(RUNS / 2)),
      );
    });

    it('variables export both ways: Airflow imports Leoflow’s file exactly, Leoflow imports Airflow’s as Airflow does', async () => {
      await fc.assert(
        fc.asyncProperty(gen.variables, async (vars) => {
          const f = new Findings();
          const ours = formatAirflowVariablesExport(vars);
          const stored = (await oracle.ask({ op: 'var_import', text: ours })) as {
            stored?: { key: string; value: string }[];
            error?: string;
          };
          const want = Object.entries(vars).map(([key, value]) => ({ key, value }));
          checkVariablesImport(want, stored as never, f);
          // Airflow's export of the same rows, imported by both.
          const exported = (await oracle.ask({
            op: 'var_export',
            vars: Object.entries(vars).map(([key, value]) => ({ key, value })),
          })) as { text?: string; error?: string };
          if (failed(exported)) {
            f.problem(`Airflow cannot export: ${exported.error}`);
          } else {
            const text = exported.text!;
            const theirs = (await oracle.ask({ op: 'var_import', text })) as never;
            checkVariablesImport(
              attempt(() => parseAirflowVariablesExport(text)),
              theirs,
              f,
            );
          }
          assertClean(f, vars);
        }),
        params(Math.ceil(RUNS / 4)),
      );
    });
  },
);

// Keeps `expect` in use for type-only runs of this file.
void expect;
