import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../../src/util/system-clock.js';
import { loadDagsFolder, watchDagsFolder } from '../../../src/boot/dags-folder.js';
import type { DagsFolderWatcher } from '../../../src/scheduler/dags/folder-watcher.js';
import { openStore } from '../../../src/store/open-store.js';
import type { Store } from '../../../src/store/store.js';

// The watched DAGs folder (issue 40), with real files and a real SQLite store: new, changed,
// removed and broken DAG files are picked up without a restart — through fs.watch, and through
// the poll alone (the fallback) — and what does not load is a stored import error with
// file:line:column, code and hint.

const T = 'default';
let base: string;
let dags: string;
let store: Store;
let watcher: DagsFolderWatcher | null = null;
const logger = pino({ level: 'silent' });

beforeEach(async () => {
  base = realpathSync(mkdtempSync(join(tmpdir(), 'lf-dagwatch-')));
  dags = join(base, 'dags');
  mkdirSync(dags);
  store = await openStore({ kind: 'sqlite', file: join(base, 'leoflow.db') });
  await store.migrate();
  await store.ensureTenant(T, 'Default', Date.now());
});
afterEach(async () => {
  await watcher?.stop();
  watcher = null;
  await store.close();
  rmSync(base, { recursive: true, force: true });
});

function writeDag(name: string, body: string): void {
  mkdirSync(join(dags, name), { recursive: true });
  writeFileSync(join(dags, name, 'leoflow.yaml'), body);
}

const simple = (id: string, tasks = ['a']) =>
  `dag_id: ${id}\ntasks:\n${tasks.map((t) => `  - task_id: ${t}\n    command: echo ${t}\n`).join('')}`;

/** Polls `probe` until it returns a value that is not undefined, or fails after `ms`. */
async function eventually<T>(probe: () => Promise<T | undefined>, ms = 8000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error('not within the time allowed');
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('loading the DAGs folder', () => {
  it('registers what loads (paused when new), and stores what does not with file:line:column, code and hint', async () => {
    writeDag('good', simple('good'));
    writeDag(
      'cycle',
      'dag_id: cycle\ntasks:\n  - task_id: a\n    command: x\n    depends_on: [a]\n',
    );
    writeDag(
      'undeclared',
      'dag_id: undeclared\ntasks:\n  - task_id: a\n    command: x\n    connections:\n      - nowhere_db\n',
    );
    const out = await loadDagsFolder(dags, store, T, systemClock, logger);
    expect(out.loaded).toEqual(['good']);
    expect((await store.getDag(T, 'good'))?.is_paused).toBe(true);
    expect((await store.getDag(T, 'good'))?.source_file).toBe('good/leoflow.yaml');
    const errors = await store.listDagImportErrors(T);
    expect(errors.map((e) => e.file)).toEqual(['cycle/leoflow.yaml', 'undeclared/leoflow.yaml']);
    const cycle = errors[0]!.diagnostics[0]!;
    expect(cycle.code).toMatch(/^LF_DAG_/);
    expect(cycle.file).toBe('cycle/leoflow.yaml');
    expect(cycle.line).toBeGreaterThan(1);
    expect(cycle.hint).not.toBe('');
    // the unknown connection points at the line and column where it is declared
    expect(errors[1]!.dag_id).toBe('undeclared');
    expect(errors[1]!.diagnostics).toEqual([
      expect.objectContaining({
        code: 'LF_DAG_UNKNOWN_DECLARATION',
        file: 'undeclared/leoflow.yaml',
        line: 6,
        column: 9,
        path: 'tasks[0].connections[0]',
        hint: expect.stringContaining('leoflow connections set'),
      }),
    ]);
    expect(await store.getDag(T, 'undeclared')).toBeUndefined();
  });

  it('keeps new DAGs unpaused when dags.paused_at_creation is false; a second file with the same dag_id is an import error', async () => {
    writeDag('a', simple('same'));
    writeDag('b', simple('same', ['x', 'y']));
    await loadDagsFolder(dags, store, T, systemClock, logger, { pausedAtCreation: false });
    expect((await store.getDag(T, 'same'))?.is_paused).toBe(false);
    const [dup] = await store.listDagImportErrors(T);
    expect(dup?.file).toBe('b/leoflow.yaml');
    expect(dup?.diagnostics[0]?.code).toBe('LF_DAG_ID_DUPLICATE');
  });
});

for (const mode of ['fs.watch', 'polling only'] as const) {
  describe(`the watched DAGs folder (${mode})`, () => {
    it('picks up new, changed, broken, fixed and removed DAG files without a restart', async () => {
      writeDag('one', simple('one'));
      watcher = await watchDagsFolder(dags, store, T, systemClock, logger, {
        pollMs: mode === 'fs.watch' ? 60_000 : 200,
        useFsWatch: mode === 'fs.watch',
      });
      if (mode === 'fs.watch') expect(watcher.watching).toBe(true);
      expect((await store.getDag(T, 'one'))?.current_version).toBe(1);

      // new
      writeDag('two', simple('two'));
      await eventually(async () => store.getDag(T, 'two'));
      // changed
      writeDag('one', simple('one', ['a', 'b']));
      await eventually(async () =>
        (await store.getDag(T, 'one'))?.current_version === 2 ? true : undefined,
      );
      // broken: an import error, and the DAG keeps its last good version and stays active
      writeDag('one', 'dag_id: one\ntasks:\n  - task_id: a\n    comand: echo typo\n');
      const [broken] = await eventually(async () => {
        const e = await store.listDagImportErrors(T);
        return e.length > 0 ? e : undefined;
      });
      expect(broken?.file).toBe('one/leoflow.yaml');
      expect(broken?.diagnostics[0]).toMatchObject({
        file: 'one/leoflow.yaml',
        line: 3,
        column: 5,
      });
      expect(await store.getDag(T, 'one')).toMatchObject({ current_version: 2, is_active: true });
      // fixed
      writeDag('one', simple('one', ['a', 'b', 'c']));
      await eventually(async () =>
        (await store.listDagImportErrors(T)).length === 0 ? true : undefined,
      );
      expect((await store.getDag(T, 'one'))?.current_version).toBe(3);
      // removed: inactive (no scheduled run), not deleted; back again: active
      rmSync(join(dags, 'two'), { recursive: true });
      await eventually(async () =>
        (await store.getDag(T, 'two'))?.is_active === false ? true : undefined,
      );
      expect((await store.listSchedulableDags()).map((d) => d.dag_id)).not.toContain('two');
      writeDag('two', simple('two'));
      await eventually(async () =>
        (await store.getDag(T, 'two'))?.is_active === true ? true : undefined,
      );
    }, 60_000);
  });
}
