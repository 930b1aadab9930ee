/**
 * The daemon's pluggable transport: `leoflow-runner --stdio` (the real bundle) speaks the runner
 * protocol over its stdin/stdout — what an ssh runner's cell uses over its SSH channel — to a
 * cell that serves that stream as the runner (CellSessionServer.serve). An attempt runs end to
 * end with its own token; closing the stream ends the daemon.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Duplex } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { defaultServerConfig } from '../../src/config/server-config.js';
import { createCellSessionServer } from '../../src/cells/cell-session.js';
import { createHarness, spec, task, type Harness } from '../support/harness.js';

let h: Harness | undefined;
const cleanups: Array<() => void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) c();
  await h?.close();
  h = undefined;
});

describe('leoflow-runner --stdio', () => {
  it('runs an assignment over stdin/stdout and exits 0 when the stream ends', async () => {
    h = await createHarness({
      runners: () => Promise.resolve({ tenant_id: 'default', labels: {}, capacity: 1 }),
    });
    const cell = createCellSessionServer({ impl: h.agentService, auth: h.agentAuth });
    cleanups.push(() => cell.close());
    const work = mkdtempSync(join(tmpdir(), 'leoflow-stdio-runner-'));
    cleanups.push(() => rmSync(work, { recursive: true, force: true }));
    let stderr = '';
    const daemon = spawn(
      process.execPath,
      [defaultServerConfig(work).subprocess.agentEntry, '--stdio', '--work-dir', join(work, 'w')],
      { env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, stdio: ['pipe', 'pipe', 'pipe'] },
    );
    daemon.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const exited = new Promise<number | null>((r) => daemon.once('exit', (c) => r(c)));
    cleanups.push(() => daemon.kill('SIGKILL'));
    cell.serve(
      { runner_id: 'rnr_ssh', tenant_id: 'default' },
      Duplex.from({ readable: daemon.stdout, writable: daemon.stdin }),
    );

    const s = spec({
      dag_id: 'over_stdio',
      tasks: [task('t', { executor: 'runner', command: 'echo via-stdio' })],
    });
    await h.store.putDagVersion(
      'default',
      s,
      createHash('sha256').update(JSON.stringify(s)).digest('hex'),
      h.clock.now(),
    );
    const run = await h.runs.trigger('default', 'over_stdio', {});
    await h.scheduler.tick();
    const deadline = Date.now() + 20_000;
    let state = '';
    while (Date.now() < deadline) {
      state = (await h.store.listTaskInstances(run.id))[0]!.state;
      if (state === 'success' || state === 'failed') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(state, stderr).toBe('success');
    const logs = await h.store.readLogs(run.id, 't', 1, 0, 100);
    expect(logs.map((l) => l.message)).toContain('via-stdio');

    daemon.stdin.end();
    expect(await exited).toBe(0);
  }, 30_000);
});
