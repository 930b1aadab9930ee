import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cli,
  scratchDir,
  startStandalone,
  waitFor,
  writeDag,
  type Standalone,
} from '../support/processes.js';

/**
 * Lite's standby agents are registered by their executor at hand-off (docs/agent.md, "Standby
 * agents"): the attempt's Register answer — its declared secrets included — reaches the agent on
 * the pipe that carries its token, and the agent makes no Register call. Real standalone, real
 * standby agents, real tasks: the chain runs, every attempt was registered at hand-off, the task
 * gets exactly what it declared, and the canary shows up in no process listing, agent
 * diagnostics file or server output.
 */
const CANARY = `CANARYhandoff${randomBytes(6).toString('hex')}`;
const UNDECLARED = `CANARYundeclared${randomBytes(6).toString('hex')}`;

let scratch: ReturnType<typeof scratchDir>;
let sa: Standalone | undefined;
const seen: string[] = [];

async function leoflow(args: string[]) {
  const res = await cli(args, { LEOFLOW_URL: sa!.url, LEOFLOW_TOKEN: sa!.token });
  seen.push(res.stdout, res.stderr);
  return res;
}

/** leoflow_attempt_registrations_total by via/outcome, from the control plane's /metrics. */
async function registrations(): Promise<Record<string, number>> {
  const text = await (await fetch(sa!.metricsUrl!)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(
    /^leoflow_attempt_registrations_total\{via="(\w+)",outcome="(\w+)"\} (\d+)$/gm,
  ))
    out[`${m[1]}/${m[2]}`] = Number(m[3]);
  return out;
}

/** The standby agents have booted, connected and wait on fd 3 (their diagnostics say so). */
function readyStandbys(dataDir: string): number {
  const dir = join(dataDir, 'agents');
  return readdirSync(dir).filter(
    (f) =>
      f.startsWith('standby-') && readFileSync(join(dir, f), 'utf8').includes('standby: ready'),
  ).length;
}

beforeAll(async () => {
  scratch = scratchDir('leoflow-handoff-');
  const dags = join(scratch.dir, 'dags');
  // Each task prints the names it received and a hash of the declared value, never the value.
  const step = (id: string, after?: string) =>
    `  - task_id: ${id}\n    type: bash\n    command: 'env | grep -o "^AIRFLOW_VAR_[A-Z_]*" | sort | tr "\\n" " "; echo; printf %s "$AIRFLOW_VAR_HANDOFF_SECRET" | sha256sum'\n` +
    (after ? `    depends_on: [${after}]\n` : '');
  const dagDir = writeDag(
    dags,
    'handoff_chain',
    `dag_id: handoff_chain\nschedule: null\nvariables: [handoff_secret]\ntasks:\n${step('a')}${step('b', 'a')}${step('c', 'b')}`,
  );
  sa = await startStandalone({
    dataDir: join(scratch.dir, 'data'),
    extraArgs: ['--secret-scoping', 'enforce', '--standby-agents', '2'],
  });
  expect(sa.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
  expect((await leoflow(['variables', 'set', 'handoff_secret', CANARY, '--secret'])).code).toBe(0);
  expect((await leoflow(['variables', 'set', 'not_declared', UNDECLARED, '--secret'])).code).toBe(
    0,
  );
  const pushed = await leoflow(['dags', 'push', dagDir]);
  expect(pushed.code, pushed.stderr).toBe(0);
});

afterAll(async () => {
  await sa?.stop();
  scratch?.cleanup();
});

describe('standby agents registered at hand-off (real standalone)', () => {
  it('a chain runs on standby agents registered at hand-off, each task with exactly its declared secret and no canary anywhere else', async () => {
    await waitFor(
      'two standby agents to be ready',
      () => Promise.resolve(readyStandbys(sa!.dataDir) >= 2 ? true : undefined),
      30_000,
    );
    const before = await registrations();
    expect(before).toMatchObject({ 'handoff/registered': 0, 'rpc/registered': 0 });

    const res = await leoflow(['runs', 'trigger', 'handoff_chain', '--wait', '-o', 'json']);
    expect(res.code, res.stderr).toBe(0);
    const runId = (JSON.parse(res.stdout) as { run: { run_id: string; state: string } }).run.run_id;
    const hash = createHash('sha256').update(CANARY).digest('hex');
    for (const task of ['a', 'b', 'c']) {
      const logs = await leoflow(['tasks', 'logs', runId, task, '-o', 'json']);
      const lines = (JSON.parse(logs.stdout) as { lines: { message: string }[] }).lines.map((l) =>
        l.message.trim(),
      );
      expect(lines, task).toContain('AIRFLOW_VAR_HANDOFF_SECRET');
      expect(lines, task).toContain(`${hash}  -`);
    }
    const after = await registrations();
    // 3 attempts. The first two meet the two ready standby agents and are registered at
    // hand-off; the third meets a refill (hand-off too, even while it boots) or, on a loaded
    // machine, no standby at all, and then its cold agent calls Register
    expect(after['handoff/registered']! + after['rpc/registered']!).toBe(3);
    const agentDiagnostics = readdirSync(join(sa!.dataDir, 'agents'))
      .map((f) => {
        const p = join(sa!.dataDir, 'agents', f);
        let link = '';
        try {
          link = readlinkSync(p);
        } catch {
          link = '(file)';
        }
        return `${f} -> ${link}\n${readFileSync(p, 'utf8').slice(0, 3000)}`;
      })
      .join('\n----\n');
    expect(after['handoff/registered'], agentDiagnostics).toBeGreaterThanOrEqual(2);
    expect(after['handoff/terminate']).toBe(0);

    // the values travelled on the pipe: no process listing, agent diagnostics file or server
    // output shows either canary
    seen.push(execFileSync('ps', ['-eo', 'pid,args', '-ww']).toString());
    const agents = join(sa!.dataDir, 'agents');
    for (const f of readdirSync(agents)) seen.push(readFileSync(join(agents, f), 'utf8'));
    seen.push(sa!.output());
    const everything = seen.join('\n');
    expect(everything).toContain('standby: ready');
    expect(everything).not.toContain(CANARY);
    expect(everything).not.toContain(UNDECLARED);
  });
});
