// heartbeat_scale: N live attempts (5,000; quick 500) heartbeating at the default interval (15 s)
// against ONE replica's agent port, each heartbeat renewing its credential and the client adopting
// the renewed token (as agents do), on SQLite and on PostgreSQL. Reports the server's CPU as a
// share of one core over the paced window, the p99 of the store write (recordHeartbeat, timed
// around the awaited call as the handler sees it), the call latency, and where the CPU goes.
// Baseline in the same run: the bare node:http2 server (credential-plane.mjs startBareHttp2)
// answering the same paced load, so the share has its floor beside it.
import { performance } from 'node:perf_hooks';
import {
  DEFAULT_CEILING_MS,
  HEARTBEAT_INTERVAL_MS,
  assemblePlane,
  assertClean,
  combineParts,
  dagSpec,
  latencySummary,
  launchAttempts,
  profileServer,
  serverSide,
  startBareHttp2,
  startLoadGenerator,
  startServer,
  taskSpec,
} from './credential-plane.mjs';
import { log, ratio, round } from './lib.mjs';

const TARGET_CORE_SHARE = 0.1;

export const description =
  'N live attempts heartbeating at the default 15 s interval (paced, open loop) on one replica, renewal on and ' +
  'renewed tokens adopted; server CPU as a share of one core and p99 of the store write; SQLite and PostgreSQL; ' +
  'bare node:http2 at the same pace as the floor';

export async function run({ quick }) {
  const attempts = quick ? 500 : 5_000;
  const windowS = quick ? 15 : 30; // one / two heartbeat intervals
  const ratePerS = (attempts * 1000) / HEARTBEAT_INTERVAL_MS;
  const count = Math.round(ratePerS * windowS);
  const out = {
    description,
    live_attempts: attempts,
    heartbeat_interval_ms: HEARTBEAT_INTERVAL_MS,
    heartbeats_per_s: round(ratePerS, 1),
    window_s: windowS,
    concurrency: 64,
    http2_sessions: 4,
    stores: {},
  };
  for (const storeKind of ['sqlite', 'postgres']) {
    log(`heartbeat_scale: ${storeKind}`);
    out.stores[storeKind] = await one(storeKind, { quick, attempts, ratePerS, count });
  }
  const shares = Object.values(out.stores).map((s) => s.server_core_share);
  out.target = { server_core_share_max: TARGET_CORE_SHARE };
  out.meets_target = shares.every((x) => x !== null && x <= TARGET_CORE_SHARE);
  return out;
}

async function one(storeKind, { quick, attempts, ratePerS, count }) {
  const plane = await assemblePlane({
    label: `hbscale_${storeKind}`,
    scoping: 'enforce',
    liveness: 'enforce',
    storeKind,
  });
  const started = [];
  try {
    const server = await startServer(plane, plane.service(DEFAULT_CEILING_MS), 'hbscale');
    started.push(server.close);
    const bare = await startBareHttp2('stream');
    started.push(bare.close);
    // 100 independent tasks per run: N/100 runs.
    const perRun = Math.min(100, attempts);
    const runs = Math.ceil(attempts / perRun);
    log(`heartbeat_scale: launching ${runs * perRun} attempts (${runs} runs × ${perRun} tasks)`);
    const t0 = performance.now();
    const launches = await launchAttempts(
      plane,
      dagSpec({
        dag_id: `bench_hbscale_${storeKind}`,
        max_active_runs: runs,
        tasks: Array.from({ length: perRun }, (_, i) => taskSpec(`t${String(i).padStart(3, '0')}`)),
      }),
      runs,
      server.url,
    );
    const launchS = round((performance.now() - t0) / 1000, 1);
    // the token each attempt holds: every paced command continues from the renewed ones
    let tokens = launches.map((l) => l.token);

    // The manual clock follows real time from here, so renewed tokens (whole-second iat) are
    // new tokens, as an agent's are: each heartbeat presents one never verified (the renewal
    // that signed it put it in the cache).
    plane.clock.advance(1_000); // the warm-up's renewals are new tokens too
    const tick = setInterval(() => plane.clock.advance(100), 100);
    started.push(async () => clearInterval(tick));

    // The store write, timed as the heartbeat handler awaits it.
    const writes = [];
    const inner = plane.store.recordHeartbeat.bind(plane.store);
    plane.store.recordHeartbeat = async (...args) => {
      const s = performance.now();
      try {
        return await inner(...args);
      } finally {
        writes.push(performance.now() - s);
      }
    };

    const gen = await startLoadGenerator();
    started.push(gen.stop);
    const paced = async (url, n, extra = {}) => {
      const r = await serverSide(plane, () =>
        gen.send({
          cmd: 'load',
          url,
          client: 'h2',
          sessions: 4,
          concurrency: 64,
          method: 'heartbeat',
          count: n,
          tokens,
          adopt: true,
          ratePerS,
          timeoutMs: quick ? 120_000 : 300_000,
          ...extra,
        }),
      );
      if (r.adopted_tokens) tokens = r.adopted_tokens;
      return r;
    };

    log('heartbeat_scale: warm-up (one heartbeat per attempt, unpaced)');
    assertClean('warm-up', await paced(server.url, attempts, { ratePerS: 0 }));
    writes.length = 0;

    log(`heartbeat_scale: bare node:http2 at ${round(ratePerS, 0)}/s`);
    const bareRaw = await paced(bare.url, Math.round(count / 2), {
      method: 'pushLogs',
      adopt: false,
    });
    assertClean('bare', bareRaw);
    const bareR = combineParts([bareRaw]);

    log(`heartbeat_scale: ${count} heartbeats at ${round(ratePerS, 0)}/s`);
    const raw = await paced(server.url, count);
    assertClean('heartbeats', raw);
    const hb = combineParts([raw]);
    if (hb.checks.renewed !== hb.count)
      throw new Error(`only ${hb.checks.renewed} of ${hb.count} heartbeats renewed`);
    if (hb.checks.should_terminate !== 0) throw new Error('a live attempt was told to terminate');
    const storeWrite = latencySummary(Float64Array.from(writes));
    const writesSeen = writes.length;

    log('heartbeat_scale: profiling the server (a separate, shorter paced run)');
    const { result, profile } = await profileServer(
      () =>
        gen.send({
          cmd: 'load',
          url: server.url,
          client: 'h2',
          sessions: 4,
          concurrency: 64,
          method: 'heartbeat',
          count: Math.round(count / 3),
          tokens,
          adopt: true,
          ratePerS,
          timeoutMs: 300_000,
        }),
      { name: `heartbeat_scale_${storeKind}` },
    );
    assertClean('profile', result);
    if (result.adopted_tokens) tokens = result.adopted_tokens;
    await gen.send({ cmd: 'exit' }).catch(() => undefined);

    const wallS = raw.wall_ms / 1000;
    const coreShare = (hb.server_cpu_us_per_call * hb.count) / 1e6 / wallS;
    const bareShare = (bareR.server_cpu_us_per_call * bareR.count) / 1e6 / (bareRaw.wall_ms / 1000);
    return {
      store: storeKind,
      launch_s: launchS,
      heartbeats: hb.count,
      achieved_per_s: hb.per_s,
      server_cpu_us_per_heartbeat: hb.server_cpu_us_per_call,
      server_core_share: round(coreShare, 3),
      bare_http2_core_share_same_pace: round(bareShare, 3),
      bare_http2_cpu_us_per_call: bareR.server_cpu_us_per_call,
      ratio_cpu_to_bare: ratio(hb.server_cpu_us_per_call, bareR.server_cpu_us_per_call),
      call_latency_ms: hb.latency_ms,
      store_write_ms: { writes: writesSeen, ...storeWrite },
      event_loop_delay_p99_ms: hb.server_event_loop_delay_p99_ms,
      token_cache: hb.token_cache,
      server_cpu_profile: profile,
    };
  } finally {
    for (const stop of [...started].reverse()) await stop();
    await plane.close();
  }
}
