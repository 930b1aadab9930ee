/**
 * The daemon's pluggable transport: `leoflow-runner --stdio` (the real bundle) speaks the runner
 * protocol over its stdin/stdout — what an ssh runner's cell uses over its SSH channel — to a
 * cell that serves that stream as the runner (CellSessionServer.serve). An attempt runs end to
 * end with its own token; closing the stream ends the daemon, and with it any task still running
 * (nothing it reports could arrive any more; the control plane retries the attempt elsewhere).
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Duplex } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { defaultServerConfig } from '../../../src/config/server-config.js';
import { createCellSessionServer } from '../../../src/runners/cells/cell-session.js';
import { createHarness, spec, task, type Harness } from '../../support/harness.js';

let h: Harness | undefined;
const cleanups: Array<() => void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) c();
  await h?.close();
  h = undefined;
});

/** A cell serving one `--stdio` daemon, and a one-task DAG on the runner executor. */
async function stdioRunner(command: string) {
  const harness = await createHarness({
    runners: () => Promise.resolve({ tenant_id: 'default', labels: {}, capacity: 1 }),
  });
  h = harness;
  const cell = createCellSessionServer({ impl: harness.agentService, auth: harness.agentAuth });
  cleanups.push(() => cell.close());
  const work = mkdtempSync(join(tmpdir(), 'leoflow-stdio-runner-'));
  cleanups.push(() => rmSync(work, { recursive: true, force: true }));
  const daemon = spawn(
    process.execPath,
    [defaultServerConfig(work).subprocess.agentEntry, '--stdio', '--work-dir', join(work, 'w')],
    { env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, stdio: ['pipe', 'pipe', 'pipe'] },
  );
  const out = { stderr: '' };
  daemon.stderr.on('data', (b: Buffer) => (out.stderr += b.toString()));
  const exited = new Promise<number | null>((r) => daemon.once('exit', (c) => r(c)));
  cleanups.push(() => daemon.kill('SIGKILL'));
  cell.serve(
    { runner_id: 'rnr_ssh', tenant_id: 'default' },
    Duplex.from({ readable: daemon.stdout, writable: daemon.stdin }),
  );

  const s = spec({ dag_id: 'over_stdio', tasks: [task('t', { executor: 'runner', command })] });
  await harness.store.putDagVersion(
    'default',
    s,
    createHash('sha256').update(JSON.stringify(s)).digest('hex'),
    harness.clock.now(),
  );
  const run = await harness.runs.trigger('default', 'over_stdio', {});
  await harness.scheduler.tick();
  const stateOf = async () => (await harness.store.listTaskInstances(run.id))[0]!.state;
  /** Polls until `done` holds of the task's state (or 20 s pass); the last state seen. */
  const waitFor = async (done: (state: string) => boolean): Promise<string> => {
    const deadline = Date.now() + 20_000;
    let state = await stateOf();
    while (!done(state) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      state = await stateOf();
    }
    return state;
  };
  return { h: harness, run, daemon, out, exited, waitFor };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('leoflow-runner --stdio', () => {
  it('runs an assignment over stdin/stdout and exits 0 when the stream ends', async () => {
    const r = await stdioRunner('echo via-stdio');
    const state = await r.waitFor((s) => s === 'success' || s === 'failed');
    expect(state, r.out.stderr).toBe('success');
    const logs = await r.h.store.readLogs(r.run.id, 't', 1, 0, 100);
    expect(logs.map((l) => l.message)).toContain('via-stdio');

    // at once: the daemon may not have its ReportState answer yet, which can no longer come
    r.daemon.stdin.end();
    expect(await r.exited, r.out.stderr).toBe(0);
  }, 30_000);

  it('stops a task still running when the stream ends, and exits 0 without waiting it out', async () => {
    const r = await stdioRunner('echo started; sleep 120');
    const state = await r.waitFor(
      (s) => s !== 'queued' && /started bash process \d+/.test(r.out.stderr),
    );
    expect(state, r.out.stderr).toBe('running');
    const pid = Number(/started bash process (\d+)/.exec(r.out.stderr)![1]);
    expect(alive(pid)).toBe(true);

    const ended = Date.now();
    r.daemon.stdin.end();
    expect(await r.exited, r.out.stderr).toBe(0);
    // the agent's cutoff after its stop signal (kill grace 5 s + 3 s), not the task's 120 s
    expect(Date.now() - ended).toBeLessThan(20_000);
    expect(alive(pid), `task ${pid} outlived the daemon`).toBe(false);
    expect(r.out.stderr).toMatch(
      /the stream ended with 1 attempt\(s\) running: stopping their tasks/,
    );
  }, 45_000);
});
