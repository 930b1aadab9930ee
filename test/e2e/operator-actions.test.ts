import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  api,
  cli,
  scratchDir,
  startStandalone,
  waitFor,
  writeDag,
  type Standalone,
} from '../support/processes.js';

let scratch: ReturnType<typeof scratchDir>;
let sa: Standalone;
let dataDir: string;
/** The sleeper ends only when this file exists, so no revoke races the task's own end. */
let gateDir: string;
let gate: string;
/** The mark test's task ends only when this file exists (it never does: the mark stops it). */
let holdGate: string;

/**
 * The sandbox gives every attempt a private /tmp and a read-only filesystem besides the paths an
 * operator lists: the scratch dir, as every test's, and the gate's dir, which lives outside it.
 */
function sandboxPaths(): string[] {
  return ['--writable-path', `${scratch.dir},${gateDir}`];
}

function env() {
  return { LEOFLOW_URL: sa.url, LEOFLOW_TOKEN: sa.token };
}

beforeAll(async () => {
  scratch = scratchDir('leoflow-ops-');
  dataDir = join(scratch.dir, 'data');
  // Attempts run under uids of their own: the gate must be readable by any of them.
  gateDir = mkdtempSync(join(tmpdir(), 'leoflow-ops-gate-'));
  chmodSync(gateDir, 0o755);
  gate = join(gateDir, 'open');
  holdGate = join(gateDir, 'hold-open');
  writeDag(
    join(scratch.dir, 'dags'),
    'hold',
    'dag_id: hold\ntasks:\n  - task_id: wait\n' +
      `    command: for i in $(seq 1 1200); do [ -f ${holdGate} ] && exit 0; sleep 0.1; done; exit 1\n` +
      '  - task_id: after\n    command: exit 1\n    depends_on: [wait]\n',
  );
  writeDag(
    join(scratch.dir, 'dags'),
    'long',
    'dag_id: long\ntasks:\n  - task_id: sleeper\n' +
      `    command: for i in $(seq 1 1200); do [ -f ${gate} ] && exit 0; sleep 0.1; done; exit 1\n`,
  );
  sa = await startStandalone({
    dataDir,
    dagsFolder: join(scratch.dir, 'dags'),
    extraArgs: sandboxPaths(),
  });
});

afterAll(async () => {
  await sa?.stop();
  scratch?.cleanup();
  if (gateDir) rmSync(gateDir, { recursive: true, force: true });
});

describe('operator actions (real processes)', () => {
  it('rotate-key re-encrypts every secret online, survives a restart, and prunes the old key only when unused', async () => {
    // One through the CLI; the rest through the API, so 24 process start-ups do not eat the
    // test's time budget on a loaded machine.
    expect((await cli(['variables', 'set', 'secret_0', 'value-0', '--secret'], env())).code).toBe(
      0,
    );
    for (let i = 1; i < 25; i++) {
      await api(sa, 'PUT', `/api/v1/variables/secret_${i}`, { value: `value-${i}`, secret: true });
    }
    expect(
      (await cli(['connections', 'set', 'db', '--uri', 'postgres://u:p%40ss@h:5432/d'], env()))
        .code,
    ).toBe(0);
    const rotated = await cli(['secrets', 'rotate-key', '-o', 'json'], env());
    expect(rotated.code, rotated.stderr).toBe(0);
    const r = JSON.parse(rotated.stdout) as {
      resealed: number;
      remaining_under_old_keys: number;
      current_key_id: string;
    };
    expect(r.resealed).toBe(26);
    expect(r.remaining_under_old_keys).toBe(0);

    await sa.stop();
    sa = await startStandalone({ dataDir, extraArgs: sandboxPaths() });
    const v = await cli(['variables', 'get', 'secret_7', '--reveal', '-o', 'json'], env());
    expect(JSON.parse(v.stdout)).toMatchObject({ key: 'secret_7', value: 'value-7' });
    const c = await api<{ connection: { password: string } }>(
      sa,
      'POST',
      '/api/v1/connections/db/reveal',
    );
    expect(c.connection.password).toBe('p@ss');

    const pruned = await cli(['secrets', 'rotate-key', '--resume', '--prune', '-o', 'json'], env());
    expect(JSON.parse(pruned.stdout)).toMatchObject({
      current_key_id: r.current_key_id,
      remaining_under_old_keys: 0,
    });
    expect((JSON.parse(pruned.stdout) as { pruned: string[] }).pruned).toHaveLength(1);
    await sa.stop();
    sa = await startStandalone({
      dataDir,
      dagsFolder: join(scratch.dir, 'dags'),
      extraArgs: sandboxPaths(),
    });
    const again = await cli(['variables', 'get', 'secret_24', '--reveal', '-o', 'json'], env());
    expect(JSON.parse(again.stdout)).toMatchObject({ value: 'value-24' });
  }, 120_000);

  it('revoke-credential keeps the attempt running; with --terminate it stops it', async () => {
    const runs = ['r_keep', 'r_stop'];
    for (const runId of runs) {
      await api(sa, 'POST', '/api/v1/dags/long/runs', { run_id: runId });
    }
    for (const runId of runs) {
      await waitFor(`${runId} running`, async () => {
        const d = await api<{ task_instances: { state: string }[] }>(
          sa,
          'GET',
          `/api/v1/dags/long/runs/${runId}`,
        );
        return d.task_instances[0]?.state === 'running' ? true : undefined;
      });
    }
    const keep = await cli(
      ['tasks', 'revoke-credential', 'r_keep', 'sleeper', '-o', 'json'],
      env(),
    );
    expect(keep.code, keep.stderr).toBe(0);
    const stop = await cli(
      ['tasks', 'revoke-credential', 'r_stop', 'sleeper', '--terminate', '-o', 'json'],
      env(),
    );
    expect(stop.code, stop.stderr).toBe(0);
    writeFileSync(gate, '');
    const final = async (runId: string) =>
      waitFor(`${runId} to finish`, async () => {
        const d = await api<{ run: { state: string } }>(
          sa,
          'GET',
          `/api/v1/dags/long/runs/${runId}`,
        );
        return d.run.state === 'success' || d.run.state === 'failed' ? d.run.state : undefined;
      });
    expect(await final('r_keep')).toBe('success');
    expect(await final('r_stop')).toBe('failed');
    const audit = await api<{ events: { action: string }[] }>(
      sa,
      'GET',
      '/api/v1/audit?action=credential.revoke',
    );
    expect(audit.events).toHaveLength(2);
    // issue 34: an attempt that ended is revoked too (its token may still verify until its exp),
    // and the answer says what changed
    const ended = await cli(['tasks', 'revoke-credential', 'r_keep', 'sleeper'], env());
    expect(ended.code, ended.stderr).toBe(0);
    expect(ended.stdout).toMatch(
      /^the credential of sleeper try 1 \(success\) was already revoked; /,
    );
    const fresh = await cli(
      ['tasks', 'revoke-credential', 'r_stop', 'sleeper', '-o', 'json'],
      env(),
    );
    expect(JSON.parse(fresh.stdout)).toMatchObject({ try_number: 1, live: false });
    const unknown = await cli(
      ['tasks', 'revoke-credential', 'r_keep', 'sleeper', '--try', '4'],
      env(),
    );
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('sleeper has no try 4 (its current try is 1)');
  }, 120_000);
  it('tasks mark / runs mark: a live attempt is stopped, the marks stand, bad input writes nothing', async () => {
    type Detail = { run: { state: string }; task_instances: { task_id: string; state: string }[] };
    const detail = (runId: string) => api<Detail>(sa, 'GET', `/api/v1/dags/hold/runs/${runId}`);
    const running = (runId: string) =>
      waitFor(`${runId} wait running`, async () =>
        (await detail(runId)).task_instances.find((t) => t.task_id === 'wait')?.state === 'running'
          ? true
          : undefined,
      );
    const finished = (runId: string) =>
      waitFor(`${runId} to finish`, async () => {
        const s = (await detail(runId)).run.state;
        return s === 'success' || s === 'failed' ? s : undefined;
      });

    await api(sa, 'POST', '/api/v1/dags/hold/runs', { run_id: 'r_mark' });
    await running('r_mark');
    const marked = await cli(
      [
        'tasks',
        'mark',
        'latest',
        'wait',
        '--state',
        'success',
        '--downstream',
        '--dag',
        'hold',
        '-o',
        'json',
      ],
      env(),
    );
    expect(marked.code, marked.stderr).toBe(0);
    expect(JSON.parse(marked.stdout)).toMatchObject({
      run_id: 'r_mark',
      marked: ['wait', 'after'],
    });
    // the run ends success although the task never finished on its own and `after` (exit 1)
    // never ran: the marks stand, the stopped attempt's end changes nothing
    expect(await finished('r_mark')).toBe('success');
    await new Promise((r) => setTimeout(r, 1500));
    const states = (await detail('r_mark')).task_instances.map((t) => [t.task_id, t.state]);
    expect(states).toEqual([
      ['wait', 'success'],
      ['after', 'success'],
    ]);

    await api(sa, 'POST', '/api/v1/dags/hold/runs', { run_id: 'r_mark2' });
    await running('r_mark2');
    const bogus = await cli(
      ['runs', 'mark', 'r_mark2', '--dag', 'hold', '--state', 'bogus'],
      env(),
    );
    expect(bogus.code).toBe(2);
    // the CLI refuses before any request (its code is LF_MARK_BAD_STATE, exit 2: usage)
    expect(bogus.stderr).toContain('--state must be success or failed, got "bogus"');
    const unknown = await cli(
      ['tasks', 'mark', 'r_mark2', 'nope', '--state', 'failed', '--dag', 'hold'],
      env(),
    );
    expect(unknown.code).not.toBe(0);
    expect(unknown.code).toBe(1); // the server's LF_TASK_NOT_FOUND
    expect(unknown.stderr).toContain('has no task "nope"');
    expect((await detail('r_mark2')).run.state).toBe('running');
    const failed = await cli(
      ['runs', 'mark', 'r_mark2', '--dag', 'hold', '--state', 'failed'],
      env(),
    );
    expect(failed.code, failed.stderr).toBe(0);
    expect(failed.stdout).toBe('marked wait, after failed; run r_mark2 is failed\n');
    expect((await detail('r_mark2')).task_instances.map((t) => t.state)).toEqual([
      'failed',
      'skipped',
    ]);
    const audit = await api<{ events: { action: string }[] }>(
      sa,
      'GET',
      '/api/v1/audit?action=run.mark',
    );
    expect(audit.events).toHaveLength(1);
  }, 120_000);
});
