// secret_rpc: GetConnections for a task that declares 20 of a vault of 1,000 connections, under
// secret_scoping=enforce and secret_liveness_mode=enforce, C concurrent clients over HTTP/2,
// beside the cheapest authenticated RPC on the same server (PushLogs with no lines: token check
// and an empty answer, no store access); and one GetConnections at a time with a token the
// verified-token cache has never seen (cold) against the same token again (warm).
// In-process control plane on SQLite (see credential-plane.mjs); clients in a child process.
import { randomBytes } from 'node:crypto';
import { create, toBinary } from '@bufbuild/protobuf';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import { declaredSet, formatConnectionUri, planScope } from '@leoflow/core';
import { GetConnectionsResponseSchema } from '@leoflow/protocol';
import { vaultAad } from '../packages/server/dist/vault/keyring.js';
import {
  TENANT,
  assemblePlane,
  assertClean,
  combineParts,
  dagSpec,
  latencySummary,
  launchAttempts,
  profileServer,
  serverSide,
  stage,
  startLoadGenerator,
  startBareHttp2,
  startServer,
  taskSpec,
} from './credential-plane.mjs';
import { log, ratio, round } from './lib.mjs';

const TARGET_RATIO = 0.7;
/** the no-op RPC's server CPU per call, at most this many times the bare node:http2 server's */
const TARGET_NOOP_CPU_VS_BARE = 1.5;
const TARGET_P99_MS = 20;
const DAG_ID = 'bench_secrets';
const TYPES = [
  ['postgres', 5432],
  ['mysql', 3306],
  ['snowflake', null],
  ['redis', 6379],
  ['http', 443],
  ['aws', null],
  ['sftp', 22],
  ['mongo', 27017],
];

export const description =
  'GetConnections: a task declaring 20 of 1,000 vault connections, scoping=enforce, liveness=enforce, ' +
  'C concurrent clients over a few HTTP/2 sessions, beside PushLogs with no lines on the same server; ' +
  'and sequential GetConnections with never-seen tokens (verified-token cache cold) vs one token (warm); SQLite';

/** A connection as an operator would store it: host, login, schema, port, a password, extras. */
function connection(i) {
  const [type, port] = TYPES[i % TYPES.length];
  const n = String(i).padStart(4, '0');
  return {
    conn_type: type,
    host: type === 'aws' ? null : `${type}-${n}.prod.internal.example.com`,
    login: type === 'aws' ? `AKIA${randomBytes(8).toString('hex').toUpperCase()}` : `svc_etl_${n}`,
    // URL-unsafe characters on purpose: the URI formatter percent-encodes them
    password: `${randomBytes(18).toString('base64url')}/+:@%`,
    schema: type === 'postgres' || type === 'mysql' ? `analytics_${i % 7}` : null,
    port,
    extra:
      i % 2 === 0
        ? { sslmode: 'require', connect_timeout: 10, application_name: `leoflow-${n}` }
        : type === 'aws'
          ? { region_name: 'eu-central-1', role_arn: `arn:aws:iam::123456789012:role/etl-${n}` }
          : null,
  };
}

export async function run({ quick }) {
  const vaultSize = 1_000;
  const declaredCount = 20;
  const count = quick ? 2_000 : 20_000; // calls per variant, in two halves (ABBA)
  const concurrency = 64;
  const sessions = 4;
  const coldSamples = quick ? 100 : 400; // ≤ 590: each cold token's iat is 1 s further back
  const timeoutMs = quick ? 60_000 : 240_000; // per load command

  const plane = await assemblePlane({ label: 'secrets', scoping: 'enforce', liveness: 'enforce' });
  // stopped in reverse order of start by the finally (and by run.mjs on any error)
  const started = [];
  try {
    log(`secret_rpc: vault of ${vaultSize} connections`);
    for (let i = 0; i < vaultSize; i++)
      await plane.vault.setConnection(
        TENANT,
        `conn_${String(i).padStart(4, '0')}`,
        connection(i),
        `bench connection ${i}`,
        plane.clock.now(),
      );
    const declared = Array.from(
      { length: declaredCount },
      (_, k) => `conn_${String(Math.floor((k * vaultSize) / declaredCount) + 7).padStart(4, '0')}`,
    );
    // Renewal off (ceiling 1 ms, passed below): the Heartbeat reference is then a token check
    // and one UPDATE. GetConnections and PushLogs never renew.
    const server = await startServer(plane, plane.service(1), 'secrets');
    started.push(server.close);
    const [launch] = await launchAttempts(
      plane,
      dagSpec({
        dag_id: DAG_ID,
        connections: declared,
        tasks: [taskSpec('load', { connections: declared })],
      }),
      1,
      server.url,
    );
    const issuedAt = plane.clock.now(); // the launch token's iat
    plane.clock.advance(5_000);
    const token = launch.token;

    // The same service with every call through Connect's node adapter (the path before issue 38).
    const viaConnect = await startServer(plane, plane.service(1), 'secrets-connect', {
      unaryPath: 'connect',
    });
    started.push(viaConnect.close);
    const bare = await startBareHttp2('stream');
    started.push(bare.close);
    const bareCompat = await startBareHttp2('compat');
    started.push(bareCompat.close);

    const gen = await startLoadGenerator();
    started.push(gen.stop);
    const load = (method, n, url = server.url) =>
      serverSide(plane, () =>
        gen.send({
          cmd: 'load',
          url,
          client: 'h2',
          sessions,
          concurrency,
          method,
          count: n,
          tokens: [token],
          adopt: false,
          timeoutMs,
        }),
      );
    // Every variant: [the RPC the load generator sends, the server it goes to]. The bare servers
    // get the no-op's exact request (PushLogs, same headers and token) and answer its exact bytes.
    const VARIANTS = {
      bare_http2: ['pushLogs', bare.url],
      bare_http2_compat: ['pushLogs', bareCompat.url],
      pushLogs: ['pushLogs', server.url],
      heartbeat: ['heartbeat', server.url],
      getConnections: ['getConnections', server.url],
      pushLogs_connect_path: ['pushLogs', viaConnect.url],
      getConnections_connect_path: ['getConnections', viaConnect.url],
    };

    log('secret_rpc: warm-up');
    for (const [m, url] of Object.values(VARIANTS))
      assertClean(`warm-up ${m}`, await load(m, 1_000, url));

    // ABCDE EDCBA halves: slow drift of a shared machine falls on every variant alike.
    const half = count / 2;
    const names = Object.keys(VARIANTS);
    const parts = Object.fromEntries(names.map((n) => [n, []]));
    for (const v of [...names, ...[...names].reverse()]) {
      const [m, url] = VARIANTS[v];
      log(`secret_rpc: ${half} × ${v}, ${concurrency} concurrent`);
      const r = await load(m, half, url);
      assertClean(v, r);
      parts[v].push(r);
    }
    const secret = combineParts(parts.getConnections);
    const baseline = combineParts(parts.pushLogs);
    const bareH2 = combineParts(parts.bare_http2);
    const bareH2Compat = combineParts(parts.bare_http2_compat);
    const heartbeat = combineParts(parts.heartbeat);
    const expectedIds = [...declared].sort();
    if (
      secret.checks.uris_min !== declaredCount ||
      secret.checks.uris_max !== declaredCount ||
      JSON.stringify(secret.checks.uri_ids) !== JSON.stringify(expectedIds)
    )
      throw new Error(
        `GetConnections answered ${secret.checks.uris_min}..${secret.checks.uris_max} connections, expected exactly the ${declaredCount} declared`,
      );
    if (heartbeat.checks.renewed !== 0) throw new Error('heartbeat reference renewed its token');

    // Cold vs warm verified-token cache, one call at a time on one session: never-seen tokens
    // for the same attempt (minted with iat 1 s, 2 s, … before the launch token's, all still
    // inside their 10 min TTL; tokens are per-second, so each is distinct) alternate with the
    // one warm token.
    log(`secret_rpc: cold vs warm token cache, ${coldSamples} of each, sequential`);
    const cold = [];
    for (let i = 0; i < coldSamples; i++)
      cold.push(await plane.tokens.mint(launch.identity, issuedAt - (i + 1) * 1_000));
    if (new Set([token, ...cold]).size !== coldSamples + 1)
      throw new Error('cold tokens are not all distinct and new');
    const interleaved = cold.flatMap((c) => [c, token]);
    const stats0 = plane.verifier.stats();
    const seq = await gen.send({
      cmd: 'sequence',
      url: server.url,
      client: 'h2',
      method: 'getConnections',
      tokens: interleaved,
      timeoutMs,
    });
    const stats1 = plane.verifier.stats();
    if (seq.timed_out || seq.checks.errors > 0)
      throw new Error(
        `cold/warm sequence: ${seq.checks.errors} errors ${seq.checks.error_samples.join(' | ')}`,
      );
    const coldLat = Float64Array.from(seq.latencies_ms.filter((_, i) => i % 2 === 0));
    const warmLat = Float64Array.from(seq.latencies_ms.filter((_, i) => i % 2 === 1));
    const misses = stats1.misses - stats0.misses;
    if (misses !== coldSamples)
      throw new Error(`cold tokens: expected ${coldSamples} cache misses, saw ${misses}`);
    const coldS = latencySummary(coldLat);
    const warmS = latencySummary(warmLat);

    log('secret_rpc: profiling the server (separate runs)');
    const profileCount = quick ? 1_000 : 4_000;
    const profiles = {};
    for (const [v, [m, url]] of Object.entries(VARIANTS)) {
      const { result, profile } = await profileServer(
        () =>
          gen.send({
            cmd: 'load',
            url,
            client: 'h2',
            sessions,
            concurrency,
            method: m,
            count: profileCount,
            tokens: [token],
            adopt: false,
            timeoutMs,
          }),
        { name: `secret_rpc_${v}` },
      );
      assertClean(`profile ${v}`, result);
      profiles[v] = profile;
    }
    await gen.send({ cmd: 'exit' }).catch(() => undefined);
    for (const stop of [...started].reverse()) await stop();

    log('secret_rpc: per-stage timings (in-process, sequential, no load)');
    const breakdown = await secretStages(plane, launch, token, declared);

    const strip = ({ checks, ...rest }) => ({
      ...rest,
      checks: {
        ok: checks.ok,
        errors: checks.errors,
        ...(checks.uris_min !== null
          ? { connections_per_answer: [checks.uris_min, checks.uris_max] }
          : {}),
      },
    });
    const r = ratio(secret.per_s, baseline.per_s);
    const p99 = secret.latency_ms.p99;
    const noopCpuVsBare = ratio(baseline.server_cpu_us_per_call, bareH2.server_cpu_us_per_call);
    const goals = {
      get_connections_ratio: r !== null && r >= TARGET_RATIO,
      get_connections_p99: p99 !== null && p99 <= TARGET_P99_MS,
      noop_cpu_vs_bare_http2: noopCpuVsBare !== null && noopCpuVsBare <= TARGET_NOOP_CPU_VS_BARE,
    };
    const vsBare = (v) => ({
      server_cpu_per_call: ratio(v.server_cpu_us_per_call, bareH2.server_cpu_us_per_call),
      rate: ratio(v.per_s, bareH2.per_s),
      server_cpu_per_call_vs_compat: ratio(
        v.server_cpu_us_per_call,
        bareH2Compat.server_cpu_us_per_call,
      ),
      rate_vs_compat: ratio(v.per_s, bareH2Compat.per_s),
    });
    return {
      description,
      store: 'sqlite',
      vault_connections: vaultSize,
      declared_connections: declaredCount,
      secret_scoping: 'enforce',
      secret_liveness_mode: 'enforce',
      calls_per_variant: count,
      concurrency,
      http2_sessions: sessions,
      client:
        'lean node:http2 gRPC client in a child process (bench/rpc-load.mjs), so the generator leaves the server its core',
      order:
        'warm-up all; bare_http2, bare_http2_compat, PushLogs, Heartbeat, GetConnections, then the same in reverse (halves)',
      bare_http2: {
        server:
          "node:http2 'stream' event: reads the body, answers a fixed gRPC frame (empty message) + grpc-status 0; no auth, no protobuf, no router",
        ...strip(bareH2),
      },
      bare_http2_compat: {
        server:
          'the same on the request/response compatibility API, the one the agent port serves through',
        ...strip(bareH2Compat),
      },
      connect_path: {
        server:
          "the same service with every call through Connect's node adapter (unaryPath: connect)",
        push_logs: strip(combineParts(parts.pushLogs_connect_path)),
        get_connections: strip(combineParts(parts.getConnections_connect_path)),
      },
      ratios_to_bare_http2: {
        noop_push_logs_connect_path: vsBare(combineParts(parts.pushLogs_connect_path)),
        noop_push_logs: vsBare(baseline),
        heartbeat_no_renewal: vsBare(heartbeat),
        get_connections: vsBare(secret),
      },
      get_connections: strip(secret),
      baseline: {
        rpc: 'PushLogs with no lines (the cheapest authenticated RPC: token check, empty answer, no store access)',
        ...strip(baseline),
      },
      heartbeat_no_renewal_reference: strip(heartbeat),
      ratio: r,
      token_cache: {
        samples: coldSamples,
        method:
          'sequential GetConnections on one session; cold = a token never presented before (distinct iat), warm = the same token again; alternating',
        cold_ms: coldS,
        warm_ms: warmS,
        cold_misses_seen: misses,
        ratio_p50_cold_to_warm: ratio(coldS.p50, warmS.p50),
        cold_minus_warm_p50_ms: round(coldS.p50 - warmS.p50, 2),
      },
      little_law_note:
        `with ${concurrency} calls always in flight, mean latency ≈ ${concurrency} / throughput: ` +
        `p99 ≤ ${TARGET_P99_MS} ms needs well over ${Math.round((concurrency * 1000) / TARGET_P99_MS)} calls/s`,
      breakdown_us: breakdown,
      server_cpu_profile: profiles,
      target: {
        ratio_min: TARGET_RATIO,
        p99_ms_max: TARGET_P99_MS,
        noop_server_cpu_vs_bare_http2_max: TARGET_NOOP_CPU_VS_BARE,
      },
      meets_target_by_goal: goals,
      meets_target: Object.values(goals).every(Boolean),
    };
  } finally {
    for (const stop of [...started].reverse()) await stop();
    await plane.close();
  }
}

/** GetConnections' stages, in its order (secret-delivery.ts), each timed alone. */
async function secretStages(plane, launch, token, declared) {
  const { tokens, verifier, store, specs, keyring, vault, secrets, clock } = plane;
  const now = clock.now();
  const claims = await verifier.verify(token, now);
  const run = await store.getRunById(claims.dag_run_id);
  const spec = await specs.get(run.tenant_id, run.dag_id, run.dag_version);
  const records = await store.getConnectionsByIds(TENANT, declared);
  const conns = [...(await vault.resolveConnections(TENANT, declared)).values()];
  const uris = Object.fromEntries(
    [...(await vault.resolveConnections(TENANT, declared))].map(([id, c]) => [
      id,
      formatConnectionUri(c),
    ]),
  );
  if (records.length !== declared.length || conns.length !== declared.length)
    throw new Error('stage setup: declared connections missing from the vault');
  const n = declared.length;
  return {
    verify_cached: await stage(() => verifier.verify(token, now)),
    verify_uncached_ed25519: await stage(() => tokens.verify(token, now), { n: 1_000 }),
    liveness_read: await stage(() =>
      store.getAttemptLiveness(claims.dag_run_id, claims.task_id, claims.try_number),
    ),
    run_read: await stage(() => store.getRunById(claims.dag_run_id)),
    run_spec_ref_read: await stage(() => store.getRunSpecRef(claims.dag_run_id)),
    spec_cache_get: await stage(() => specs.get(run.tenant_id, run.dag_id, run.dag_version)),
    declared_set_and_plan: await stage(() =>
      planScope('enforce', declaredSet(spec, claims.task_id, 'connections')),
    ),
    [`query_${n}_connections`]: await stage(() => store.getConnectionsByIds(TENANT, declared)),
    [`query_${n}_connections_split`]: await querySplit(plane.dbFile, declared),
    [`decrypt_and_parse_${n}`]: await stage(() => {
      for (const rec of records) {
        const plain = keyring.open(
          rec.secret_cipher,
          rec.key_id,
          vaultAad('connection', rec.tenant_id, rec.conn_id),
        );
        JSON.parse(Buffer.from(plain).toString('utf8'));
      }
    }),
    [`vault_resolve_${n}`]: await stage(() => vault.resolveConnections(TENANT, declared)),
    [`uri_format_${n}`]: await stage(() => {
      for (const c of conns) formatConnectionUri(c);
    }),
    secret_delivery_total: await stage(() => secrets.connections(claims)),
    encode_response: await stage(() =>
      toBinary(
        GetConnectionsResponseSchema,
        create(GetConnectionsResponseSchema, { connectionUris: uris }),
      ),
    ),
    note:
      'µs per call, p50 and mean of sequential awaited calls in the server process with no load. ' +
      'secret_delivery_total = liveness read + run_spec_ref read + spec + plan + vault_resolve + uri_format (+ metrics); ' +
      'run_read (the whole run row) is what delivery read before it took run_spec_ref; ' +
      'GetConnections = verify + secret_delivery_total + protobuf encode + the RPC stack (see server_cpu_profile)',
  };
}

/**
 * The 20-connection query taken apart on a second, read-only connection to the same database
 * file: building and compiling it with Kysely, SQLite preparing the statement (what a query
 * through the store's Kysely driver pays every time), and running an already prepared
 * statement (what the store's read-only SQLite connection for the secret path pays: it prepares
 * once, see sqlite-hot-reads.ts). What query_N_connections spends beyond the last is the
 * store's async plumbing and row mapping.
 */
async function querySplit(dbFile, declared) {
  const db = new BetterSqlite3(dbFile, { readonly: true, fileMustExist: true });
  const k = new Kysely({ dialect: new SqliteDialect({ database: db }) });
  try {
    const build = () =>
      k
        .selectFrom('connections')
        .selectAll()
        .where('tenant_id', '=', TENANT)
        .where('conn_id', 'in', declared)
        .orderBy('conn_id')
        .compile();
    const compiled = build();
    const stmt = db.prepare(compiled.sql);
    if (stmt.all(...compiled.parameters).length !== declared.length)
      throw new Error('query split: wrong row count');
    return {
      kysely_build_and_compile: await stage(() => build()),
      sqlite_prepare: await stage(() => db.prepare(compiled.sql)),
      sqlite_run_prepared: await stage(() => stmt.all(...compiled.parameters)),
    };
  } finally {
    await k.destroy();
  }
}
