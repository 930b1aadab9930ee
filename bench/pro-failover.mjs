// pro_failover: Leoflow Pro's replicas on one PostgreSQL (a fresh database of its own).
//
// 1. Failover time: two `leoflow server --role all` replicas; the leader is killed with SIGKILL
//    and a run is triggered on the survivor at that moment; failover = kill → the run's first
//    task claimed (queued_at) by the new leader. Baseline, same run: trigger → claim on a healthy
//    leader. Repeated; the killed replica comes back as a follower each time.
// 2. API throughput with one vs two `api` replicas, same run, ABBA order: GET /api/v1/dags
//    (token verified, tenant-scoped query), C concurrent keep-alive clients, round-robin over
//    the replicas under test. The load generator shares this machine's cores with the servers.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { join } from 'node:path';
import pg from 'pg';
import {
  CLI,
  REPO,
  checkAborted,
  log,
  onCleanup,
  percentile,
  ratio,
  round,
  sleep,
  summary,
  tempDir,
  writeDag,
} from './lib.mjs';

export const description =
  'Pro: failover time (leader SIGKILLed → first claim by the new leader) beside a healthy trigger→claim, and REST throughput with 1 vs 2 api replicas, one PostgreSQL, same run';

const LEASE = { ttl: '3s', renew: '500ms', margin: '1s', boundMs: 3_500 };

function adminUrl() {
  return process.env.LEOFLOW_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
}

async function freshDatabase() {
  const name = `lf_bench_pro_${process.pid}_${randomBytes(3).toString('hex')}`;
  const admin = async (q) => {
    const c = new pg.Client({ connectionString: adminUrl() });
    await c.connect();
    try {
      await c.query(q);
    } finally {
      await c.end();
    }
  };
  await admin(`CREATE DATABASE "${name}"`);
  const u = new URL(adminUrl());
  u.pathname = `/${name}`;
  const drop = onCleanup(() => admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
  return { url: u.toString(), drop };
}

async function freePort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

/** One address in front of every live replica's agent port, as a Service would be. */
async function agentService(backends) {
  const sockets = new Set();
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('error', () => undefined);
    client.on('close', () => sockets.delete(client));
    client.pause();
    const ports = backends();
    const attempt = (i) => {
      if (i >= ports.length) return client.destroy();
      const up = net.connect(ports[i], '127.0.0.1');
      up.once('error', () => attempt(i + 1));
      up.once('connect', () => {
        sockets.add(up);
        up.removeAllListeners('error');
        up.on('error', () => client.destroy());
        up.on('close', () => client.destroy());
        client.on('close', () => up.destroy());
        client.pipe(up);
        up.pipe(client);
        client.resume();
      });
    };
    attempt(0);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const close = onCleanup(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((r) => server.close(r));
  });
  return { url: `http://127.0.0.1:${server.address().port}`, close };
}

async function startServer(ctx, name, role, ports) {
  checkAborted();
  const http = ports?.http ?? (await freePort());
  const agent = ports?.agent ?? (await freePort());
  const dataDir = join(ctx.root, name);
  mkdirSync(dataDir, { recursive: true });
  const proc = spawn(
    process.execPath,
    [
      CLI,
      'server',
      '--role',
      role,
      '--data-dir',
      dataDir,
      '--keys-dir',
      ctx.keysDir,
      '--database-url',
      ctx.db.url,
      '--http-port',
      String(http),
      '--agent-port',
      String(agent),
      '--agent-advertise-url',
      ctx.service.url,
      '--metrics-port',
      '0',
      '--standby-agents',
      '0',
      '--lease-ttl',
      LEASE.ttl,
      '--lease-renew-interval',
      LEASE.renew,
      '--lease-safety-margin',
      LEASE.margin,
      '--dags-folder',
      ctx.dags,
    ],
    {
      cwd: REPO,
      env: { ...process.env, LEOFLOW_LOG_LEVEL: 'warn', LEOFLOW_SECRET_KEY: ctx.key },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  proc.stdout.on('data', (b) => (out += b));
  proc.stderr.on('data', (b) => (out += b));
  const exited = new Promise((r) => proc.once('exit', r));
  const stop = onCleanup(async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    await exited;
  });
  await new Promise((res, rej) => {
    const t = setTimeout(() => rej(new Error(`${name} did not start:\n${out}`)), 60_000);
    proc.stdout.on('data', () => {
      if (/is running\./.test(out)) {
        clearTimeout(t);
        res();
      }
    });
    proc.once('exit', (c) => {
      clearTimeout(t);
      rej(new Error(`${name} exited (${c}):\n${out}`));
    });
  });
  const url = `http://127.0.0.1:${http}`;
  const server = {
    name,
    role,
    url,
    ports: { http, agent },
    proc,
    exited,
    stop,
    async leads() {
      try {
        const r = await (await fetch(`${url}/readyz`)).json();
        return r.checks.some((c) => c.name === 'leader' && c.detail === 'this replica');
      } catch {
        return false;
      }
    },
  };
  ctx.servers.set(name, server);
  return server;
}

async function trigger(server, token, runId) {
  const res = await fetch(`${server.url}/api/v1/dags/pulse/runs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ run_id: runId }),
  });
  if (res.status !== 201 && res.status !== 200) {
    throw new Error(`trigger ${runId}: HTTP ${res.status} ${await res.text()}`);
  }
}

async function claimedAt(client, runId, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await client.query(
      `select ti.queued_at from task_instances ti join dag_runs r on r.id = ti.dag_run_id
        where r.run_id = $1 and ti.queued_at is not null`,
      [runId],
    );
    if (rows[0]) return Number(rows[0].queued_at);
    if (Date.now() > deadline)
      throw new Error(`run ${runId} was not claimed within ${timeoutMs} ms`);
    await sleep(20);
  }
}

async function waitFor(what, fn, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await fn()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

async function restLoad(targets, token, n, concurrency) {
  const agents = targets.map(() => new http.Agent({ keepAlive: true, maxSockets: concurrency }));
  let next = 0;
  const lat = [];
  const once = (i) =>
    new Promise((res, rej) => {
      const t0 = process.hrtime.bigint();
      const req = http.request(
        `${targets[i].url}/api/v1/dags`,
        { agent: agents[i], headers: { authorization: `Bearer ${token}` } },
        (r) => {
          r.resume();
          r.on('end', () =>
            r.statusCode === 200
              ? res(Number(process.hrtime.bigint() - t0) / 1e6)
              : rej(new Error(`HTTP ${r.statusCode}`)),
          );
        },
      );
      req.on('error', rej);
      req.end();
    });
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, w) => {
      while (next < n) {
        const k = next++;
        lat.push(await once((k + w) % targets.length));
      }
    }),
  );
  const ms = performance.now() - t0;
  for (const a of agents) a.destroy();
  return { rps: (lat.length / ms) * 1000, lat };
}

export async function run({ quick }) {
  const kills = quick ? 2 : 6;
  const requests = quick ? 2_000 : 12_000;
  const scratch = tempDir('leoflow-bench-pro-');
  const ctx = {
    root: join(scratch.dir, 'replicas'),
    keysDir: join(scratch.dir, 'keys'),
    dags: join(scratch.dir, 'dags'),
    key: randomBytes(32).toString('base64'),
    servers: new Map(),
    db: null,
    service: null,
  };
  writeDag(ctx.dags, 'pulse', 'dag_id: pulse\ntasks:\n  - task_id: beat\n    command: "true"\n');
  ctx.db = await freshDatabase();
  ctx.service = await agentService(() =>
    [...ctx.servers.values()].filter((s) => s.proc.exitCode === null).map((s) => s.ports.agent),
  );
  const client = new pg.Client({ connectionString: ctx.db.url });
  await client.connect();
  onCleanup(() => client.end());
  try {
    log('pro_failover: starting two `all` replicas');
    await startServer(ctx, 'a', 'all');
    const token = readFileSync(join(ctx.keysDir, 'admin.token'), 'utf8').trim();
    await startServer(ctx, 'b', 'all');

    const healthy = [];
    const failover = [];
    for (let i = 0; i < kills; i++) {
      const [a, b] = [ctx.servers.get('a'), ctx.servers.get('b')];
      let leader = null;
      await waitFor('a leader', async () => {
        leader = (await a.leads()) ? a : (await b.leads()) ? b : null;
        return leader !== null;
      });
      const survivor = leader === a ? b : a;
      // Baseline: trigger → claim with a healthy leader.
      const base = `healthy-${i}`;
      const t0 = Date.now();
      await trigger(survivor, token, base);
      healthy.push((await claimedAt(client, base)) - t0);
      await sleep(300);
      // Failover: kill the leader, trigger at once on the survivor.
      const run = `failover-${i}`;
      const killedAt = Date.now();
      leader.proc.kill('SIGKILL');
      await leader.exited;
      await trigger(survivor, token, run);
      failover.push((await claimedAt(client, run)) - killedAt);
      log(`pro_failover: kill ${i + 1}/${kills}: first claim ${failover.at(-1)} ms after the kill`);
      await startServer(ctx, leader.name, 'all', leader.ports);
    }

    log('pro_failover: REST throughput, 1 vs 2 api replicas');
    const api1 = await startServer(ctx, 'api-1', 'api');
    const api2 = await startServer(ctx, 'api-2', 'api');
    await restLoad([api1, api2], token, Math.min(1_000, requests / 4), 16);
    const one = [];
    const two = [];
    for (const which of ['one', 'two', 'two', 'one']) {
      const r = await restLoad(which === 'one' ? [api1] : [api1, api2], token, requests / 2, 16);
      (which === 'one' ? one : two).push(r);
    }
    const merge = (rs) => ({
      rps: round(rs.reduce((s, r) => s + r.rps, 0) / rs.length, 0),
      p50_ms: round(
        percentile(
          rs.flatMap((r) => r.lat),
          50,
        ),
        2,
      ),
      p99_ms: round(
        percentile(
          rs.flatMap((r) => r.lat),
          99,
        ),
        2,
      ),
    });
    const m1 = merge(one);
    const m2 = merge(two);
    return {
      lease: {
        ttl: LEASE.ttl,
        renew_interval: LEASE.renew,
        safety_margin: LEASE.margin,
        takeover_bound_ms: LEASE.boundMs,
      },
      failover_ms: summary(failover, 0),
      healthy_trigger_to_claim_ms: summary(healthy, 0),
      failover_over_healthy_p50: ratio(percentile(failover, 50), percentile(healthy, 50)),
      kills,
      rest_one_api_replica: m1,
      rest_two_api_replicas: m2,
      rest_throughput_ratio_two_over_one: ratio(m2.rps, m1.rps),
      note: 'one machine: both api replicas, PostgreSQL and the load generator share its cores, so two replicas cannot double throughput here',
      target_failover_max_ms: LEASE.boundMs + 2_000,
      meets_target: Math.max(...failover) < LEASE.boundMs + 2_000,
    };
  } finally {
    for (const s of ctx.servers.values()) await s.stop();
    await ctx.service?.close();
    await scratch.remove();
  }
}
