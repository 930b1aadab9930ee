/**
 * Issue 34: every example DAG declares each secret it reads, so the examples run under the
 * defaults (secret_scoping=enforce), and `npm start`'s vault seed holds every declared name, so
 * registration accepts them. Reads are found statically in every file of a DAG folder: the
 * Airflow env names (AIRFLOW_CONN_<ID>, AIRFLOW_VAR_<KEY>) and the SDK's getConnection /
 * getVariable / googleAuth / get_connection / get_variable calls with a literal name.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

const REPO = join(import.meta.dirname, '..', '..');
const DAGS = join(REPO, 'examples/dags');
const VAULT = join(REPO, 'examples/vault');

interface Declares {
  connections: Set<string>;
  variables: Set<string>;
}

/** The DAG's declarations and every task's (the declared set is their union for this check). */
function declarations(folder: string): Declares {
  const y = parse(readFileSync(join(folder, 'leoflow.yaml'), 'utf8')) as {
    connections?: string[];
    variables?: string[];
    tasks?: { connections?: string[]; variables?: string[] }[];
  };
  const out: Declares = { connections: new Set(), variables: new Set() };
  for (const scope of [y, ...(y.tasks ?? [])]) {
    for (const c of scope.connections ?? []) out.connections.add(c);
    for (const v of scope.variables ?? []) out.variables.add(v);
  }
  return out;
}

/** What the folder's files read, as Airflow's env names would spell it (upper case). */
function reads(text: string): { connections: string[]; variables: string[] } {
  const connections = new Set<string>();
  const variables = new Set<string>();
  for (const m of text.matchAll(/AIRFLOW_CONN_([A-Z0-9_]+)/g)) connections.add(m[1]!);
  for (const m of text.matchAll(/AIRFLOW_VAR_([A-Z0-9_]+)/g)) variables.add(m[1]!);
  for (const m of text.matchAll(/\b(?:getConnection|googleAuth|get_connection)\(\s*['"]([^'"]+)['"]/g))
    connections.add(m[1]!.toUpperCase());
  for (const m of text.matchAll(/\b(?:getVariable|get_variable|Variable\.get)\(\s*['"]([^'"]+)['"]/g))
    variables.add(m[1]!.toUpperCase());
  return { connections: [...connections].sort(), variables: [...variables].sort() };
}

function filesOf(folder: string): string[] {
  return readdirSync(folder).flatMap((f) => {
    const p = join(folder, f);
    return statSync(p).isDirectory() ? filesOf(p) : [p];
  });
}

const folders = readdirSync(DAGS)
  .map((d) => join(DAGS, d))
  .filter((p) => statSync(p).isDirectory());

describe('every example DAG declares each secret it reads', () => {
  it('finds the examples', () => {
    expect(folders.length).toBeGreaterThanOrEqual(5);
  });

  it.each(folders.map((f) => [f.slice(DAGS.length + 1), f]))('%s', (_name, folder) => {
    const declared = declarations(folder);
    const up = (s: Set<string>) => new Set([...s].map((n) => n.toUpperCase()));
    const text = filesOf(folder)
      .map((f) => readFileSync(f, 'utf8'))
      .join('\n');
    const r = reads(text);
    expect(r.connections.filter((c) => !up(declared.connections).has(c))).toEqual([]);
    expect(r.variables.filter((v) => !up(declared.variables).has(v))).toEqual([]);
    // npm start seeds examples/vault: a declared name it lacks would be refused at registration
    const conns = Object.keys(
      JSON.parse(readFileSync(join(VAULT, 'connections.json'), 'utf8')) as object,
    );
    const vars = Object.keys(
      JSON.parse(readFileSync(join(VAULT, 'variables.json'), 'utf8')) as object,
    );
    for (const c of declared.connections) expect(conns).toContain(c);
    for (const v of declared.variables) expect(vars).toContain(v);
  });

  it('the scanner sees each kind of read (so an undeclared one would turn this red)', () => {
    expect(
      reads(
        "process.env.AIRFLOW_CONN_A; os.environ['AIRFLOW_VAR_B']; getConnection('c'); getVariable(\"d\"); googleAuth('e')",
      ),
    ).toEqual({ connections: ['A', 'C', 'E'], variables: ['B', 'D'] });
  });
});
