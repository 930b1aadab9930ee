import { describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/index.js';
import type { TaskInstanceRow } from '../../src/store/types.js';

/** What the shared storage suite hands to the task-mapping cases. */
export interface TaskMappingCaseContext {
  store(): Store;
  fixture(label?: string): Promise<{
    tenant_id: string;
    run: { id: string };
    extract: TaskInstanceRow;
    load: TaskInstanceRow;
  }>;
  T0: number;
}

const SOLE = { kind: 'sole', epoch: 1 } as const;

/**
 * Dynamic task mapping in the store (migration 0015), on both dialects: a task instance is (run,
 * task, map index); expansion and its reset are one fenced write; liveness, XCom, logs and
 * history key on the map index.
 */
export function registerTaskMappingCases(ctx: TaskMappingCaseContext): void {
  const { T0 } = ctx;
  const store = () => ctx.store();

  async function expanded(n: number, label = 'map') {
    const fx = await ctx.fixture(label);
    const ok = await store().expandTaskInstance(
      fx.load.id,
      { states: ['none'], try_number: 1, leader: SOLE },
      Array.from({ length: n }, (_, i) => ({ map_value: { FILE: `f${i}.csv` } })),
      2,
      T0 + 1,
    );
    expect(ok).toBe(true);
    const rows = (await store().listTaskInstances(fx.run.id)).filter((t) => t.task_id === 'load');
    return { ...fx, rows };
  }

  describe('task mapping (map_index)', () => {
    it('expands one unexpanded row into scheduled map indexes 0..n-1 with their arguments', async () => {
      const { rows, load } = await expanded(3);
      expect(rows.map((r) => [r.map_index, r.state, r.try_number, r.map_value?.FILE])).toEqual([
        [0, 'scheduled', 1, 'f0.csv'],
        [1, 'scheduled', 1, 'f1.csv'],
        [2, 'scheduled', 1, 'f2.csv'],
      ]);
      // index 0 is the unexpanded row itself
      expect(rows[0]!.id).toBe(load.id);
      expect(rows.map((r) => r.max_tries)).toEqual([3, 3, 3]);
      expect(new Set(rows.map((r) => r.id)).size).toBe(3);
    });

    it('expands nothing when the expectation or the leader fence does not hold', async () => {
      const fx = await ctx.fixture('nofence');
      if ((store() as { dialect?: string }).dialect === 'postgres') {
        // a lease fence (Pro) that no longer holds: a deposed leader expands nothing
        const deposed = { kind: 'lease', name: 'scheduler', epoch: 424242 } as const;
        expect(
          await store().expandTaskInstance(
            fx.load.id,
            { states: ['none'], try_number: 1, leader: deposed },
            [{ map_value: {} }, { map_value: {} }],
            0,
            T0,
          ),
        ).toBe(false);
      }
      expect(
        await store().expandTaskInstance(
          fx.load.id,
          { states: ['scheduled'], try_number: 1, leader: SOLE },
          [{ map_value: {} }],
          0,
          T0,
        ),
      ).toBe(false);
      const rows = (await store().listTaskInstances(fx.run.id)).filter((t) => t.task_id === 'load');
      expect(rows.map((r) => [r.map_index, r.state])).toEqual([[-1, 'none']]);
    });

    it('keys liveness on the map index: a live index 4 is not index 3 at the same try', async () => {
      const { run, rows } = await expanded(5, 'd3');
      const [three, four] = [rows[3]!, rows[4]!];
      await store().updateTaskInstance(
        four.id,
        { states: ['scheduled'] },
        { state: 'running' },
        T0,
      );
      await store().updateTaskInstance(
        three.id,
        { states: ['scheduled'] },
        { state: 'success' },
        T0,
      );
      expect(await store().getAttemptLiveness(run.id, 'load', 1, 0, 4)).toEqual({
        live: true,
        revoked: false,
      });
      expect(await store().getAttemptLiveness(run.id, 'load', 1, 0, 3)).toEqual({
        live: false,
        revoked: false,
      });
      // and the unmapped key of the same task finds nothing
      expect((await store().getAttemptLiveness(run.id, 'load', 1, 0)).live).toBe(false);
      expect(await store().getAttemptFence(four.id)).toMatchObject({
        map_index: 4,
        state: 'running',
      });
    });

    it('keeps each map index its own XCom, logs and history', async () => {
      const { run, rows, tenant_id } = await expanded(2, 'own');
      for (const r of rows) {
        await store().putXCom({
          tenant_id,
          dag_run_id: run.id,
          task_id: 'load',
          map_index: r.map_index,
          key: 'return_value',
          value: new TextEncoder().encode(`"v${r.map_index}"`),
          content_type: 'text/plain',
          created_at: T0,
        });
        await store().appendLogs([
          {
            tenant_id,
            dag_run_id: run.id,
            task_id: 'load',
            map_index: r.map_index,
            try_number: 1,
            line_number: 1,
            time: T0,
            stream: 'stdout',
            message: `line of ${r.map_index}`,
          },
        ]);
      }
      const text = (v: Uint8Array | undefined) => new TextDecoder().decode(v);
      expect(text((await store().getXCom(run.id, 'load', 'return_value', 1))?.value)).toBe('"v1"');
      expect(await store().getXCom(run.id, 'load', 'return_value')).toBeUndefined();
      expect(
        (await store().listMappedXComs(run.id, 'load', 'return_value')).map((x) => text(x.value)),
      ).toEqual(['"v0"', '"v1"']);
      expect((await store().readLogs(run.id, 'load', 1, 0, 10, 1)).map((l) => l.message)).toEqual([
        'line of 1',
      ]);
      expect(await store().readLogs(run.id, 'load', 1, 0, 10)).toEqual([]);

      await store().updateTaskInstance(
        rows[1]!.id,
        { states: ['scheduled'] },
        { state: 'running' },
        T0,
      );
      expect(
        await store().archiveAndBumpTry(
          rows[1]!.id,
          { states: ['running'], try_number: 1 },
          'failed',
          { state: 'up_for_retry' },
          T0 + 2,
        ),
      ).toBe(true);
      const history = await store().listTaskInstanceHistory(run.id, 'load', 1);
      expect(history.map((h) => [h.map_index, h.try_number, h.state])).toEqual([[1, 1, 'failed']]);
      expect(await store().listTaskInstanceHistory(run.id, 'load', 0)).toEqual([]);
    });

    it('resets an expanded task to one unexpanded row, archiving every index, and re-expands with tries continued', async () => {
      const { run, rows } = await expanded(3, 'reset');
      for (const r of rows) {
        await store().updateTaskInstance(r.id, { states: ['scheduled'] }, { state: 'success' }, T0);
      }
      expect(await store().resetMappedTask(run.id, 'load', 1, T0 + 5)).toBe(true);
      const after = (await store().listTaskInstances(run.id)).filter((t) => t.task_id === 'load');
      expect(after.map((r) => [r.map_index, r.state, r.try_number, r.map_value])).toEqual([
        [-1, 'none', 2, null],
      ]);
      expect(
        (await store().listTaskInstanceHistory(run.id, 'load')).map((h) => [
          h.map_index,
          h.try_number,
        ]),
      ).toEqual([
        [0, 1],
        [1, 1],
        [2, 1],
      ]);
      // re-expanded to four: indexes 1 and 2 continue at try 2, 3 is new at try 1
      expect(
        await store().expandTaskInstance(
          after[0]!.id,
          { states: ['none'], try_number: 2, leader: SOLE },
          [{ map_value: {} }, { map_value: {} }, { map_value: {} }, { map_value: {} }],
          0,
          T0 + 6,
        ),
      ).toBe(true);
      const again = (await store().listTaskInstances(run.id)).filter((t) => t.task_id === 'load');
      expect(again.map((r) => [r.map_index, r.try_number])).toEqual([
        [0, 2],
        [1, 2],
        [2, 2],
        [3, 1],
      ]);
    });

    it('refuses to reset while a map index is queued or running', async () => {
      const { run, rows } = await expanded(2, 'busy');
      await store().updateTaskInstance(
        rows[1]!.id,
        { states: ['scheduled'] },
        { state: 'queued' },
        T0,
      );
      expect(await store().resetMappedTask(run.id, 'load', 0, T0 + 1)).toBe(false);
      expect(
        (await store().listTaskInstances(run.id)).filter((t) => t.task_id === 'load'),
      ).toHaveLength(2);
    });

    it('records a branch decision with the success and clears it with the try', async () => {
      const { extract } = await ctx.fixture('decision');
      await store().updateTaskInstance(extract.id, { states: ['none'] }, { state: 'running' }, T0);
      await store().updateTaskInstance(
        extract.id,
        { states: ['running'] },
        { state: 'success', decision: { followed: ['load'], skipped: ['other'] } },
        T0,
      );
      expect((await store().getTaskInstanceById(extract.id))?.decision).toEqual({
        followed: ['load'],
        skipped: ['other'],
      });
      await store().archiveAndBumpTry(
        extract.id,
        { states: ['success'], try_number: 1 },
        'success',
        { state: 'none', decision: null },
        T0 + 1,
      );
      expect((await store().getTaskInstanceById(extract.id))?.decision).toBeNull();
    });
  });
}
