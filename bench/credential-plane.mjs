// Shared pieces of the credential-plane benchmarks (heartbeat_renewal, secret_rpc): the control
// plane's credential path assembled in this process from the BUILT server (packages/*/dist) by
// the server's own assemblePlane (boot/plane-assembly.ts, which the control plane and the test
// harness call too) — SQLite store, file signing keyring, caching verifier, vault, scheduler on a
// manual clock with a recording executor, the real agent RPC server over h2c on 127.0.0.1 — and
// a load-generator child process (bench/rpc-load.mjs).
//
// Everything a function here creates is registered with lib.mjs's cleanup registry.
import { fork } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import http2 from 'node:http2';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { ManualClock, agentTokenTtlSeconds } from '@leoflow/core';
import { AgentService } from '@leoflow/protocol';
import pg from 'pg';
import { pino } from 'pino';
import { AGENT_TOKEN_CLOCK_TOLERANCE_SECONDS } from '../packages/server/dist/auth/agent-token.js';
import {
  keyRetentionSeconds,
  loadSigningKeyring,
} from '../packages/server/dist/auth/signing-keys.js';
import { CredentialMetrics } from '../packages/server/dist/rpc/credential-metrics.js';
import { startAgentRpcServer } from '../packages/server/dist/rpc/agent-server.js';
import { Executors } from '../packages/server/dist/executor/executors.js';
import { assemblePlane as serverAssemblePlane } from '../packages/server/dist/boot/plane-assembly.js';
import { openStore } from '../packages/server/dist/store/index.js';
import { Keyring } from '../packages/server/dist/vault/keyring.js';
import { REPO, checkAborted, log, onCleanup, round, tempDir } from './lib.mjs';

export const TENANT = 'default';
/** production defaults (docs/run-loop.md, Tuning) */
export const HEARTBEAT_INTERVAL_MS = 15_000;
export const DEFAULT_CEILING_MS = 24 * 3600_000;

// ---------------------------------------------------------------------------------------------
// the plane

/** Records launches (and their tokens) instead of starting agents; the bench plays the agents. */
class RecordingExecutor {
  name = 'recording';
  posture = { tokenTransport: 'recorded by the benchmark' };
  launches = [];
  /** mints at start, as the subprocess executor does; the bench reads launch.token */
  async start(launch) {
    this.launches.push({ ...launch, token: await launch.credential.mint() });
  }
  terminate() {
    return Promise.resolve();
  }
  onAgentExit() {}
  running() {
    return 0;
  }
  close() {
    return Promise.resolve();
  }
  take() {
    return this.launches.splice(0);
  }
}

/**
 * Store + signing keyring + vault, and the parts assemblePlane wires from them (ttl from the
 * default 15 s heartbeat, the agent keyring with its retention, CredentialMetrics). The clock is
 * manual, starting at a whole second; the scheduler is never started, only ticked.
 */
export async function assemblePlane({ label, scoping, liveness, storeKind = 'sqlite' }) {
  checkAborted();
  const tmp = tempDir(`leoflow-bench-${label}-`);
  const dbFile = join(tmp.dir, 'data', 'leoflow.db');
  let dropDatabase = async () => undefined;
  let store;
  if (storeKind === 'postgres') {
    const db = await freshPostgresDatabase(label);
    dropDatabase = db.drop;
    store = await openStore({ kind: 'postgres', url: db.url });
  } else {
    store = await openStore({ kind: 'sqlite', file: dbFile });
  }
  const closeStore = onCleanup(async () => {
    await store.close();
    await dropDatabase();
  });
  await store.migrate();
  const clock = new ManualClock(Math.floor(Date.now() / 1000) * 1000);
  await store.ensureTenant(TENANT, TENANT, clock.now());
  const logger = pino({ level: 'silent' });
  const ttlSeconds = agentTokenTtlSeconds(HEARTBEAT_INTERVAL_MS / 1000);
  const agentKeys = await loadSigningKeyring(join(tmp.dir, 'data'), 'agent', {
    retainSeconds: keyRetentionSeconds(ttlSeconds, AGENT_TOKEN_CLOCK_TOLERANCE_SECONDS),
    clock: () => clock.now(),
  });
  const keyring = new Keyring({ id: 'k-bench', key: randomBytes(32) });
  const executor = new RecordingExecutor();
  const metrics = new CredentialMetrics({ defaultMetrics: false });
  // Wired by the server's own assembly (boot/plane-assembly.ts), as the control plane wires it. The
  // per-try delivery record is on unless LEOFLOW_BENCH_NO_RECORDS=1 (to measure what it costs).
  const inputs = (maxCredentialLifetimeMs) => ({
    store,
    clock,
    logger,
    agentKeys,
    agentTokenTtlSeconds: ttlSeconds,
    vaultKeyring: keyring,
    executors: new Executors([executor]),
    agentUrl: 'http://agent.invalid',
    timings: {
      tickMs: 250,
      heartbeatIntervalMs: HEARTBEAT_INTERVAL_MS,
      agentLostThresholdMs: 90_000,
      dispatchLostThresholdMs: 180_000,
      timeoutGraceMs: 30_000,
      settlingGraceMs: 90_000,
    },
    credentials: { scoping, liveness, maxCredentialLifetimeMs },
    channelSecure: true, // loopback
    recordAttempts: process.env.LEOFLOW_BENCH_NO_RECORDS !== '1',
    metrics,
  });
  const parts = serverAssemblePlane(inputs(DEFAULT_CEILING_MS));
  const { tokens, verifier, vault, specs, lifecycle, runs, scheduler, secrets } = parts;
  return {
    dir: tmp.dir,
    dbFile,
    store,
    clock,
    logger,
    ttlSeconds,
    tokens,
    verifier,
    keyring,
    vault,
    specs,
    executor,
    lifecycle,
    runs,
    scheduler,
    metrics,
    secrets,
    /** the agent port's authentication, as the control plane builds it */
    auth: parts.agentAuth,
    /** an agent service over this plane; only the renewal ceiling varies between instances */
    service(maxCredentialLifetimeMs) {
      // the gate's verified-token cache (plane.auth reads it), so renewed tokens land there
      return serverAssemblePlane({ ...inputs(maxCredentialLifetimeMs), verifier }).agentService;
    },
    async close() {
      await closeStore();
      await tmp.remove();
    },
  };
}

/** The PostgreSQL the tests use (scripts/dev-services.sh), a database of its own per plane. */
async function freshPostgresDatabase(label) {
  const adminUrl =
    process.env.LEOFLOW_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const name = `lf_bench_${label.replace(/[^a-z0-9_]/gi, '_')}_${process.pid}_${randomBytes(3).toString('hex')}`;
  const admin = async (q) => {
    const c = new pg.Client({ connectionString: adminUrl });
    await c.connect();
    try {
      await c.query(q);
    } finally {
      await c.end();
    }
  };
  await admin(`CREATE DATABASE "${name}"`);
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  return { url: u.toString(), drop: () => admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`) };
}

/** The real agent RPC listener (h2c) on an ephemeral loopback port, authenticated as in production. */
export async function startServer(plane, impl, label, { unaryPath = 'lean' } = {}) {
  checkAborted();
  const server = await startAgentRpcServer({
    impl,
    unaryPath,
    host: '127.0.0.1',
    port: 0,
    tls: null,
    auth: plane.auth,
    onInternalError: (err) => log(`${label}: agent RPC internal error: ${err?.stack ?? err}`),
  });
  const url = `http://127.0.0.1:${server.port}`;
  const close = onCleanup(() => server.close());
  return { url, close };
}

/**
 * The physical limit beside every RPC figure: a bare node:http2 server on loopback that answers
 * every POST with a fixed gRPC answer (headers, one length-prefixed frame holding an empty
 * message — what PushLogs with no lines answers — and grpc-status 0 in trailers) after reading
 * the request body. No token check, no protobuf, no router: what HTTP/2 and the socket cost.
 * `api`: 'stream' (the core 'stream' event) or 'compat' (the request/response API the agent port
 * itself serves through, rpc/agent-server.ts).
 */
export async function startBareHttp2(api = 'stream') {
  checkAborted();
  const frame = Buffer.from([0, 0, 0, 0, 0]);
  const server = http2.createServer();
  if (api === 'stream') {
    server.on('stream', (stream) => {
      stream.on('data', () => undefined);
      stream.on('end', () => {
        stream.respond(
          { ':status': 200, 'content-type': 'application/grpc+proto' },
          { waitForTrailers: true },
        );
        stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
        stream.end(frame);
      });
      stream.on('error', () => undefined);
    });
  } else {
    server.on('request', (req, res) => {
      req.on('data', () => undefined);
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/grpc+proto' });
        res.addTrailers({ 'grpc-status': '0' });
        res.end(frame);
      });
    });
  }
  const sessions = new Set();
  server.on('session', (s) => {
    sessions.add(s);
    s.on('close', () => sessions.delete(s));
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const url = `http://127.0.0.1:${server.address().port}`;
  const close = onCleanup(
    () =>
      new Promise((resolve) => {
        for (const s of sessions) s.close();
        server.close(() => resolve());
        setTimeout(() => {
          for (const s of sessions) s.destroy();
        }, 2_000).unref();
      }),
  );
  return { url, close };
}

export function dagSpec(partial) {
  return {
    schema_version: '1.0',
    description: '',
    owner: '',
    tags: [],
    schedule: null,
    schedule_timezone: 'UTC',
    start_date: null,
    end_date: null,
    catchup: false,
    max_active_runs: 16,
    max_active_tasks: 0,
    defaults: { retries: 0, retry_delay_seconds: 300, execution_timeout_seconds: null },
    params: {},
    variables: [],
    connections: [],
    ...partial,
  };
}

export function taskSpec(task_id, extra = {}) {
  return {
    task_id,
    type: 'bash',
    command: `echo ${task_id}`,
    depends_on: [],
    trigger_rule: 'all_success',
    retries: 0,
    retry_delay_seconds: 300,
    execution_timeout_seconds: null,
    env: {},
    variables: [],
    connections: [],
    do_xcom_push: false,
    ...extra,
  };
}

/**
 * The session key every benchmark "agent" binds at Register and sends on each call (rpc-load.mjs
 * repeats it: the load generator is a child process). An attempt's token works only with it.
 */
export const BENCH_SESSION_KEY = 'bench-agent-session-key';

/**
 * Registers the DAG, triggers `runs` manual runs of it, ticks the scheduler until every task
 * instance is dispatched (its token captured by the recording executor), then plays each agent's
 * Register over the real RPC server, so every attempt ends `running` with a live token.
 */
export async function launchAttempts(plane, spec, runs, url) {
  const { store, clock } = plane;
  const json = JSON.stringify(spec);
  await store.putDagVersion(
    TENANT,
    spec,
    createHash('sha256').update(json).digest('hex'),
    clock.now(),
  );
  for (let i = 0; i < runs; i++) {
    if (i % 100 === 0) checkAborted();
    await plane.runs.trigger(TENANT, spec.dag_id, { runId: `bench_${String(i).padStart(5, '0')}` });
  }
  const expected = runs * spec.tasks.length;
  const launches = [];
  for (let t = 0; t < 20 && launches.length < expected; t++) {
    await plane.scheduler.tick();
    launches.push(...plane.executor.take());
  }
  if (launches.length !== expected)
    throw new Error(`dispatched ${launches.length} attempts, expected ${expected}`);

  const transport = createGrpcTransport({ baseUrl: url });
  const client = createClient(AgentService, transport);
  let next = 0;
  const register = async () => {
    while (next < launches.length) {
      const l = launches[next++];
      await client.register(
        {
          agentVersion: 'bench',
          hostname: 'bench',
          pid: 1,
          sessionKey: BENCH_SESSION_KEY,
          // as this build's agent: it masks its own output, so the server does not on write
          masksSecrets: true,
        },
        { headers: { authorization: `Bearer ${l.token}` }, timeoutMs: 10_000 },
      );
    }
  };
  await Promise.all(Array.from({ length: 16 }, register));
  for (const l of launches) {
    const ti = await store.getTaskInstanceById(l.identity.task_instance_id);
    if (ti?.state !== 'running') throw new Error(`attempt ${ti?.id} is ${ti?.state}, not running`);
  }
  return launches;
}

// ---------------------------------------------------------------------------------------------
// the load generator

/** Forks bench/rpc-load.mjs; its commands resolve with the child's result. */
export async function startLoadGenerator() {
  checkAborted();
  const child = fork(join(REPO, 'bench/rpc-load.mjs'), [], {
    cwd: REPO,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    serialization: 'advanced',
  });
  const pending = new Map();
  let seq = 0;
  let exitError = null;
  const exited = new Promise((r) => child.once('exit', r));
  child.on('exit', (code, sig) => {
    exitError = new Error(`load generator exited (${code ?? sig})`);
    for (const p of pending.values()) p.reject(exitError);
    pending.clear();
  });
  child.on('message', (m) => {
    const p = pending.get(m.id);
    if (!p) return;
    pending.delete(m.id);
    if (m.ok) p.resolve(m.result);
    else p.reject(new Error(`load generator: ${m.error}`));
  });
  const stop = onCleanup(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(t);
    }
  });
  await new Promise((res, rej) => {
    const t = setTimeout(() => rej(new Error('load generator did not start in 30 s')), 30_000);
    child.once('message', (m) => {
      clearTimeout(t);
      if (m.ready) res();
      else rej(new Error('load generator: unexpected first message'));
    });
    child.once('exit', () => {
      clearTimeout(t);
      rej(exitError);
    });
  });
  const send = (msg) => {
    checkAborted();
    if (exitError) return Promise.reject(exitError);
    const id = ++seq;
    return new Promise((resolve, reject) => {
      pending.set(id, { resolve, reject });
      child.send({ ...msg, id });
    });
  };
  return { pid: child.pid, send, stop };
}

// ---------------------------------------------------------------------------------------------
// measurement helpers

/**
 * Runs fn (one load command) and reports, next to its result, what the SERVER (this process)
 * spent: CPU per call, event-loop utilization, event-loop delay p99, verified-token cache hits
 * and misses.
 */
export async function serverSide(plane, fn) {
  const h = monitorEventLoopDelay({ resolution: 5 });
  const cache0 = plane.verifier.stats();
  const elu0 = performance.eventLoopUtilization();
  const cpu0 = process.cpuUsage();
  h.enable();
  let result;
  try {
    result = await fn();
  } finally {
    h.disable();
  }
  const cpu = process.cpuUsage(cpu0);
  const elu = performance.eventLoopUtilization(elu0);
  const cache1 = plane.verifier.stats();
  const n = Math.max(1, result.count);
  return {
    ...result,
    server: {
      cpu_us_per_call: round((cpu.user + cpu.system) / n, 1),
      event_loop_utilization: round(elu.utilization, 3),
      event_loop_delay_p99_ms: round(h.percentile(99) / 1e6, 2),
      token_cache: { hits: cache1.hits - cache0.hits, misses: cache1.misses - cache0.misses },
    },
  };
}

/** Nearest-rank percentiles of a Float64Array, in ms. */
export function latencySummary(xs) {
  if (xs.length === 0) return { p50: null, p90: null, p99: null, max: null, mean: null };
  const s = Float64Array.from(xs).sort();
  const at = (p) => s[Math.min(s.length, Math.max(1, Math.ceil((p / 100) * s.length))) - 1];
  let sum = 0;
  for (const x of s) sum += x;
  return {
    p50: round(at(50), 2),
    p90: round(at(90), 2),
    p99: round(at(99), 2),
    max: round(s[s.length - 1], 2),
    mean: round(sum / s.length, 2),
  };
}

/**
 * Joins the parts of one variant measured at different times (ABBA order, so slow drift of a
 * shared machine falls on both variants alike): calls / summed wall time, exact percentiles
 * over every call, server figures weighted by calls.
 */
export function combineParts(parts) {
  const count = parts.reduce((a, p) => a + p.count, 0);
  const wall = parts.reduce((a, p) => a + p.wall_ms, 0);
  const all = new Float64Array(count);
  let off = 0;
  for (const p of parts) {
    all.set(p.latencies_ms, off);
    off += p.latencies_ms.length;
  }
  const weighted = (get, digits) =>
    round(parts.reduce((a, p) => a + get(p) * p.count, 0) / Math.max(1, count), digits);
  return {
    count,
    per_s: round((count * 1000) / wall, 0),
    latency_ms: latencySummary(all),
    parts_per_s: parts.map((p) => round(p.per_s, 0)),
    parts_p99_ms: parts.map((p) => round(p.latency_ms.p99, 2)),
    server_cpu_us_per_call: weighted((p) => p.server.cpu_us_per_call, 1),
    server_event_loop_utilization: weighted((p) => p.server.event_loop_utilization, 3),
    server_event_loop_delay_p99_ms: round(
      Math.max(...parts.map((p) => p.server.event_loop_delay_p99_ms)),
      2,
    ),
    client_cpu_us_per_call: weighted((p) => p.client_cpu_us_per_call, 1),
    token_cache: {
      hits: parts.reduce((a, p) => a + p.server.token_cache.hits, 0),
      misses: parts.reduce((a, p) => a + p.server.token_cache.misses, 0),
    },
    timed_out: parts.some((p) => p.timed_out),
    checks: parts.map((p) => p.checks).reduce(mergeChecks),
  };
}

function mergeChecks(a, b) {
  const min = (x, y) => (x === null ? y : y === null ? x : Math.min(x, y));
  const max = (x, y) => (x === null ? y : y === null ? x : Math.max(x, y));
  return {
    ok: a.ok + b.ok,
    errors: a.errors + b.errors,
    error_samples: [...a.error_samples, ...b.error_samples].slice(0, 5),
    renewed: a.renewed + b.renewed,
    renewed_same_token: a.renewed_same_token + b.renewed_same_token,
    should_terminate: a.should_terminate + b.should_terminate,
    uris_min: min(a.uris_min, b.uris_min),
    uris_max: max(a.uris_max, b.uris_max),
    uri_ids: a.uri_ids ?? b.uri_ids,
  };
}

/**
 * Times `n` sequential awaited calls of fn (after `warmup` untimed ones): microseconds per call,
 * p50 and mean. For the per-stage breakdowns; every loop bounded by n and by maxMs.
 */
export async function stage(fn, { n = 2_000, warmup = 200, maxMs = 10_000 } = {}) {
  checkAborted();
  for (let i = 0; i < warmup; i++) await fn(i);
  const xs = [];
  const deadline = performance.now() + maxMs;
  for (let i = 0; i < n && performance.now() < deadline; i++) {
    const s = performance.now();
    await fn(warmup + i);
    xs.push((performance.now() - s) * 1000);
  }
  xs.sort((a, b) => a - b);
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  return { n: xs.length, p50_us: round(xs[Math.floor(xs.length / 2)], 1), mean_us: round(mean, 1) };
}

/** Fails the measurement when a phase saw errors or ran out of time: no silent bad figures. */
export function assertClean(what, r) {
  if (r.timed_out) throw new Error(`${what}: ran out of time after ${r.count} calls`);
  if (r.checks.errors > 0)
    throw new Error(
      `${what}: ${r.checks.errors} of ${r.count} calls failed: ${r.checks.error_samples.join(' | ')}`,
    );
}

// ---------------------------------------------------------------------------------------------
// where the server's CPU goes, measured: a sampling CPU profile of this process (the server)
// around one load command, every sample attributed to the library that caused it.

const LIBRARIES = [
  [/@connectrpc\/connect-node\//, 'connect_node_adapter'],
  [/@connectrpc\/connect\//, 'connect_protocol'],
  [/@bufbuild\/protobuf\//, 'protobuf'],
  // one bucket: the driver runs SQLite statements inline, so samples do not split cleanly
  // between the two (the stage timings do: build/compile, prepare, run)
  [/\/kysely\/|\/better-sqlite3\//, 'sql_kysely_and_sqlite'],
  // the store's read-only SQLite connection for the secret path calls better-sqlite3's native
  // statements directly (no JS frame of better-sqlite3 in between): SQL too
  [/packages\/server\/dist\/store\/sqlite-hot-reads\.js/, 'sql_kysely_and_sqlite'],
  [/\/jose\//, 'jose_jwt_with_its_crypto'],
  [/\/prom-client\//, 'prom_client'],
  [/\/pino\//, 'pino'],
  // the server by stage of a call (issue 38), before the catch-all below
  [/packages\/server\/dist\/rpc\/grpc-unary\.js/, 'server_grpc_framing'],
  [/packages\/server\/dist\/rpc\/agent-server\.js/, 'server_port_gate'],
  [
    /packages\/server\/dist\/(rpc\/agent-auth|auth\/token-cache|attempts\/session-binding)\.js/,
    'server_auth_token_session',
  ],
  [/packages\/server\/dist\/vault\//, 'server_vault'],
  [/packages\/server\/dist\/(rpc\/agent-service|attempts)\//, 'server_handlers'],
  [/packages\/server\/dist\//, 'leoflow_server'],
  [/packages\/core\/dist\//, 'leoflow_core'],
  [/packages\/protocol\/dist\//, 'leoflow_protocol'],
  [/\/bench\//, 'bench_harness'],
];

function libraryOf(url) {
  for (const [re, name] of LIBRARIES) if (re.test(url)) return name;
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  return m ? m[1] : null;
}

/**
 * Self time of each sample goes to the nearest frame (leaf upwards) that belongs to a library:
 * node internals (http2, streams, events, AbortSignal) count for the library that called them,
 * except node:crypto (AES-GCM, SHA-256), which is `node_crypto` unless jose called it; what no
 * library called (the HTTP/2 session reading its socket, timers) is `node_http2_and_io` or
 * `node_other`; the profiler's own work is left out.
 */
function attribute(profile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const owner = new Map();
  const ownerOf = (id) => {
    if (owner.has(id)) return owner.get(id);
    const leaf = byId.get(id).callFrame;
    let name = null;
    if (leaf.functionName === '(idle)') name = 'idle';
    else if (leaf.functionName === '(garbage collector)') name = 'garbage_collector';
    else if (leaf.functionName === '(program)') name = 'native_unattributed';
    else {
      for (let cur = id; cur !== undefined && name === null; cur = parent.get(cur))
        if (byId.get(cur).callFrame.url === 'node:inspector') name = 'profiler_itself';
      let crypto = false;
      for (let cur = id; cur !== undefined && name === null; cur = parent.get(cur)) {
        const url = byId.get(cur).callFrame.url;
        if (url.startsWith('node:internal/crypto/')) crypto = true;
        name = libraryOf(url);
      }
      if (name !== null && crypto && name !== 'jose_jwt_with_its_crypto') name = 'node_crypto';
      if (name === null)
        name = /node:internal\/(http2|stream|net|tls|timers)/.test(leaf.url)
          ? 'node_http2_and_io'
          : 'node_other';
    }
    owner.set(id, name);
    return name;
  };
  const us = {};
  for (let i = 0; i < profile.samples.length; i++) {
    const name = ownerOf(profile.samples[i]);
    us[name] = (us[name] ?? 0) + (profile.timeDeltas[i] ?? 0);
  }
  return us;
}

/**
 * Runs fn (one load command against this process's server) under the V8 sampling profiler.
 * Returns fn's result and, per library, the share of the server's busy (non-idle) samples and
 * the µs per call that share stands for. The profiler costs a little; measured figures come
 * from runs without it.
 */
export async function profileServer(fn, { intervalUs = 250, name = 'server' } = {}) {
  checkAborted();
  const session = new Session();
  session.connect();
  let result;
  let profile;
  try {
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: intervalUs });
    await session.post('Profiler.start');
    try {
      result = await fn();
    } finally {
      ({ profile } = await session.post('Profiler.stop'));
    }
  } finally {
    session.disconnect();
  }
  // Profiling aid: LEOFLOW_BENCH_CPU_PROFILE_DIR=<dir> keeps each raw profile (open it in Chrome
  // DevTools or speedscope) beside the attribution in the JSON.
  const keepDir = process.env.LEOFLOW_BENCH_CPU_PROFILE_DIR;
  if (keepDir) {
    mkdirSync(keepDir, { recursive: true });
    const file = join(keepDir, `${name}-${Date.now()}.cpuprofile`);
    writeFileSync(file, JSON.stringify(profile));
    log(`wrote ${file}`);
  }
  const us = attribute(profile);
  const server = ([k]) => k !== 'idle' && k !== 'profiler_itself';
  const busy = Object.entries(us)
    .filter(server)
    .reduce((a, [, v]) => a + v, 0);
  const calls = Math.max(1, result.count);
  const rows = Object.entries(us)
    .filter(server)
    .sort((a, b) => b[1] - a[1]);
  return {
    result,
    profile: {
      calls: result.count,
      busy_ms: round(busy / 1000, 0),
      idle_ms: round((us.idle ?? 0) / 1000, 0),
      busy_us_per_call: round(busy / calls, 1),
      profiler_itself_ms: round((us.profiler_itself ?? 0) / 1000, 0),
      share_pct: Object.fromEntries(rows.map(([k, v]) => [k, round((100 * v) / busy, 1)])),
      us_per_call: Object.fromEntries(rows.map(([k, v]) => [k, round(v / calls, 1)])),
    },
  };
}
