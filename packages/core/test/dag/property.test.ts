import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compileDagYaml, dagSpecHash, validateDagSpec } from '@leoflow/core';
import { compileText } from './helpers.js';

/**
 * Random DAGs as adjacency lists over task indices: task i may only depend on tasks j < i, so
 * the graph is acyclic by construction.
 */
const acyclicDag = fc
  .integer({ min: 1, max: 25 })
  .chain((n) =>
    fc.tuple(
      fc.constant(n),
      fc.array(fc.uniqueArray(fc.nat({ max: Math.max(0, n - 1) }), { maxLength: 4 }), {
        minLength: n,
        maxLength: n,
      }),
      fc.boolean(), // shuffle the order the tasks are written in
      fc.integer(),
    ),
  )
  .map(([n, rawDeps, shuffle, seed]) => {
    const deps = rawDeps.map((ds, i) => ds.filter((d) => d < i));
    const order = Array.from({ length: n }, (_, i) => i);
    if (shuffle) {
      let s = seed;
      for (let i = n - 1; i > 0; i--) {
        s = (s * 1103515245 + 12345) & 0x7fffffff;
        const j = s % (i + 1);
        [order[i], order[j]] = [order[j]!, order[i]!];
      }
    }
    return { n, deps, order };
  });

const name = (i: number): string => `t${i}`;

function toYaml(deps: number[][], order: number[]): string {
  const lines = ['dag_id: random', 'tasks:'];
  for (const i of order) {
    lines.push(`  - task_id: ${name(i)}`, `    command: echo ${i}`);
    if (deps[i]!.length > 0) lines.push(`    depends_on: [${deps[i]!.map(name).join(', ')}]`);
  }
  return `${lines.join('\n')}\n`;
}

/** True when `to` is reachable from `from` following depends_on edges. */
function reaches(deps: number[][], from: number, to: number): boolean {
  const seen = new Set<number>();
  const stack = [from];
  while (stack.length > 0) {
    const v = stack.pop()!;
    if (v === to) return true;
    if (seen.has(v)) continue;
    seen.add(v);
    stack.push(...deps[v]!);
  }
  return false;
}

describe('property: the dependency graph', () => {
  it('every random acyclic DAG compiles, keeps its edges, and validates as dag.json', () => {
    fc.assert(
      fc.property(acyclicDag, ({ deps, order }) => {
        const r = compileText(toYaml(deps, order));
        expect(r.ok).toBe(true);
        if (!r.ok) return;
        expect(r.spec.tasks.map((t) => t.task_id)).toEqual(order.map(name));
        for (const t of r.spec.tasks) {
          expect(t.depends_on).toEqual(deps[Number(t.task_id.slice(1))]!.map(name));
        }
        expect(validateDagSpec(JSON.parse(JSON.stringify(r.spec)))).toMatchObject({ ok: true });
      }),
      { numRuns: 200 },
    );
  });

  it('adding a back-edge to a random DAG reports LF_DAG_CYCLE with a real cycle', () => {
    fc.assert(
      fc.property(acyclicDag, fc.nat(), fc.nat(), ({ n, deps, order }, x, y) => {
        // Pick a → b with b reachable from a (b ≠ a unless self-loop), then add b depends_on a.
        const a = x % n;
        const reachable = Array.from({ length: n }, (_, i) => i).filter((i) => reaches(deps, a, i));
        const b = reachable[y % reachable.length]!;
        const withBackEdge = deps.map((d) => [...d]);
        if (!withBackEdge[b]!.includes(a)) withBackEdge[b]!.push(a);

        const r = compileText(toYaml(withBackEdge, order));
        expect(r.ok).toBe(false);
        if (r.ok) return;
        const cycles = r.errors.filter((e) => e.code === 'LF_DAG_CYCLE');
        expect(cycles.length).toBeGreaterThanOrEqual(1);
        expect(r.errors.every((e) => e.code === 'LF_DAG_CYCLE')).toBe(true);
        for (const c of cycles) {
          const m = /forms a cycle: (.*) \(each arrow/.exec(c.message);
          const selfLoop = /task "(t\d+)" depends on itself/.exec(c.message);
          const path = m ? m[1]!.split(' → ') : [selfLoop![1]!, selfLoop![1]!];
          expect(path[0]).toBe(path[path.length - 1]);
          for (let k = 0; k + 1 < path.length; k++) {
            const from = Number(path[k]!.slice(1));
            const to = Number(path[k + 1]!.slice(1));
            expect(withBackEdge[from], `${path[k]} → ${path[k + 1]}`).toContain(to);
          }
        }
      }),
      { numRuns: 200 },
    );
  });

  it('the hash does not depend on how the YAML is formatted', () => {
    fc.assert(
      fc.property(acyclicDag, ({ deps, order }) => {
        const block = toYaml(deps, order);
        const flow = `{dag_id: random, tasks: [${order
          .map(
            (i) =>
              `{command: "echo ${i}", task_id: ${name(i)}${deps[i]!.length ? `, depends_on: [${deps[i]!.map(name).join(', ')}]` : ''}}`,
          )
          .join(', ')}]}`;
        const a = compileText(block);
        const b = compileText(flow);
        expect(a.ok && b.ok).toBe(true);
        if (a.ok && b.ok) expect(dagSpecHash(a.spec)).toBe(dagSpecHash(b.spec));
      }),
      { numRuns: 100 },
    );
  });
});

describe('property: robustness', () => {
  it('never throws on arbitrary text', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), (text) => {
        compileDagYaml({ text, fileName: 'f.yaml', dirName: 'd', readScript: () => undefined });
      }),
      { numRuns: 500 },
    );
  });

  it('never throws on a valid file with a character deleted or inserted, and positions stay in the text', () => {
    const base = `dag_id: fuzz
schedule: "0 6 * * *"
start_date: 2026-01-01
tasks:
  - task_id: a
    command: echo a
    env: {A: "1"}
  - task_id: b
    depends_on: [a]
    script: run.sh
`;
    const lines = (t: string): string[] => t.split('\n');
    fc.assert(
      fc.property(
        fc.nat({ max: base.length - 1 }),
        fc.constantFrom('', ':', '-', ' ', '[', '"', '&x', '*x', '\t', '\n'),
        (at, ins) => {
          const text = base.slice(0, at) + ins + base.slice(at + 1);
          const r = compileDagYaml({
            text,
            fileName: 'f.yaml',
            dirName: 'd',
            readScript: (p) => (p === 'run.sh' ? 'echo run' : undefined),
          });
          const ls = lines(text);
          for (const d of r.ok ? r.warnings : [...r.errors, ...r.warnings]) {
            expect(d.line).toBeGreaterThanOrEqual(1);
            expect(d.line).toBeLessThanOrEqual(ls.length);
            expect(d.column).toBeGreaterThanOrEqual(1);
            expect(d.column).toBeLessThanOrEqual(ls[d.line - 1]!.length + 1);
          }
        },
      ),
      { numRuns: 400 },
    );
  });
});
