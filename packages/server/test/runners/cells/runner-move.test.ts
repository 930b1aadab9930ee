/**
 * Two cells, one door, one real `leoflow-runner` (the bundle, --url-stdin): each cell has its
 * own store and agent service and checks placement itself (servesTenant). The tenant's runner
 * runs cell A's attempt; the tenant is moved to cell B and A's sessions drop; the daemon,
 * reconnecting through the door, lands on cell B and runs cell B's attempt — with no change on
 * the machine; and each cell's own check refuses a tenant placed elsewhere. In-process cells (harnesses) with a
 * real door, real cell endpoints and a real daemon process.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createCellSessionServer,
  type CellSessionServer,
} from '../../../src/runners/cells/cell-session.js';
import { servesTenant } from '../../../src/runners/placement.js';
import { defaultServerConfig } from '../../../src/config/server-config.js';
import { SESSION_CLOSE } from '@leoflow/protocol';
import { createDoorFixture, wsAttempt, type DoorFixture } from '../door/door-fixture.js';
import { createHarness, spec, task, type Harness } from '../../support/harness.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function waitUntil(what: string, probe: () => Promise<boolean>, ms = 20_000) {
  const deadline = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function runOnRunner(h: Harness, dag_id: string, command: string) {
  const s = spec({ dag_id, tasks: [task('t', { executor: 'runner', command })] });
  const hash = createHash('sha256').update(JSON.stringify(s)).digest('hex');
  await h.store.putDagVersion('default', s, hash, h.clock.now());
  const run = await h.runs.trigger('default', dag_id, {});
  await h.scheduler.tick();
  return run;
}

describe('moving a tenant between cells with a live runner', () => {
  it('the runner follows the placement: after the move its next session lands on cell B, which runs B’s attempts', async () => {
    let f: DoorFixture | undefined;
    const runnerById = async (id: string) => {
      const r = await f!.directory.runnerById(id);
      return r && (await f!.directory.getRunner(r.tenant_id, r.name));
    };
    const cells = new Map<string, { h: Harness; sessions: CellSessionServer }>();
    for (const name of ['cell-a', 'cell-b']) {
      const h = await createHarness({ runners: runnerById });
      const sessions = createCellSessionServer({ impl: h.agentService, auth: h.agentAuth });
      cells.set(name, { h, sessions });
      cleanups.push(async () => {
        sessions.close();
        await h.close();
      });
    }
    f = await createDoorFixture({
      onSession: (cell, grant, ws) => cells.get(cell)!.sessions.accept(grant, ws),
      // each cell's own check, as the control plane's: the tenant's current cell is this one
      serves: (cell, grant) =>
        servesTenant(f!.directory, { kind: 'directory' }, cell, grant.tenant_id),
    });
    const fixture = f;
    cleanups.push(() => fixture.close());
    await f.addCell('cell-a');
    await f.addCell('cell-b');
    await f.place('default', 'cell-a');
    const { token } = await f.addRunner('default', 'lin-1');

    const work = mkdtempSync(join(tmpdir(), 'leoflow-runner-move-'));
    cleanups.push(() => rmSync(work, { recursive: true, force: true }));
    let stderr = '';
    const daemon: ChildProcess = spawn(
      process.execPath,
      [
        defaultServerConfig(work).subprocess.agentEntry,
        '--url-stdin',
        '--work-dir',
        join(work, 'w'),
      ],
      { env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, stdio: ['pipe', 'ignore', 'pipe'] },
    );
    daemon.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
    daemon.stdin!.end(`${f.url}/runners/${token}/\n`);
    cleanups.push(
      () =>
        new Promise<void>((resolve) => {
          if (daemon.exitCode !== null) return resolve();
          daemon.once('exit', () => resolve());
          daemon.kill('SIGKILL');
        }),
    );

    const a = cells.get('cell-a')!;
    const b = cells.get('cell-b')!;
    const state = async (h: Harness, runId: string) =>
      (await h.store.listTaskInstances(runId))[0]!.state;

    const runA = await runOnRunner(a.h, 'on_a', 'echo on-cell-a');
    await waitUntil(
      'cell A’s attempt to succeed',
      async () => (await state(a.h, runA.id)) === 'success',
    ).catch((e: unknown) => {
      throw new Error(`${String(e)}\n${stderr}`);
    });
    expect(f.cells.get('cell-a')!.calls.sessions).toBeGreaterThanOrEqual(1);
    expect(f.cells.get('cell-b')!.calls).toEqual({ secrets: 0, sessions: 0 });

    // Move the tenant. Its established session stays on A until it drops; drop it (A going away).
    await f.place('default', 'cell-b');
    const runB = await runOnRunner(b.h, 'on_b', 'echo on-cell-b');
    expect(await state(b.h, runB.id)).toBe('queued');
    f.cells.get('cell-a')!.sessions.closeAll(SESSION_CLOSE.shuttingDown);

    await waitUntil(
      'cell B’s attempt to succeed',
      async () => (await state(b.h, runB.id)) === 'success',
    ).catch((e: unknown) => {
      throw new Error(`${String(e)}\n${stderr}`);
    });
    expect((await b.h.store.readLogs(runB.id, 't', 1, 0, 10)).map((l) => l.message)).toContain(
      'on-cell-b',
    );
    expect(f.cells.get('cell-b')!.calls.sessions).toBeGreaterThanOrEqual(1);
    // nothing of B's attempt reached A; the runner's token never reached either cell
    expect(await a.h.store.listTaskInstances(runB.id)).toEqual([]);
    expect(stderr).not.toContain(token);
    expect(f.logLines.join('\n')).not.toContain(token);
    expect(daemon.exitCode).toBeNull();
    // each cell's own check, both sides: B serves the moved tenant, A no longer does
    expect(await servesTenant(f.directory, { kind: 'directory' }, 'cell-b', 'default')).toBe(true);
    expect(await servesTenant(f.directory, { kind: 'directory' }, 'cell-a', 'default')).toBe(false);
    expect(await servesTenant(f.directory, { kind: 'directory' }, null, 'default')).toBe(false);
    expect(await servesTenant(f.directory, { kind: 'lite', url: 'x' }, null, 'default')).toBe(true);
  }, 60_000);
});

describe("a cell's own placement check", () => {
  it('refuses the session upgrade of a tenant it does not serve (the door answers 502), and accepts once it does', async () => {
    let serving = false;
    const f = await createDoorFixture({ serves: () => Promise.resolve(serving) });
    cleanups.push(() => f.close());
    await f.addCell('cell-a');
    await f.place('default', 'cell-a');
    const { token } = await f.addRunner('default', 'lin-1');
    const url = `${f.url.replace('http:', 'ws:')}/runners/${token}/session`;
    const refused = await wsAttempt(url);
    expect(refused.open).toBe(false);
    if (!refused.open) expect(refused.status).toBe(502);
    serving = true;
    const accepted = await wsAttempt(url);
    expect(accepted.open).toBe(true);
    if (accepted.open) accepted.ws.terminate();
  });
});
