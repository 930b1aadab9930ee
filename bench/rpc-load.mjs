// Load generator for the credential-plane benchmarks, run as a child process (child_process.fork)
// so the agent RPC server under test keeps the bench process's event loop to itself, as it has
// a control plane's to itself in production (agents are separate processes).
//
// It talks to the parent over the IPC channel only. Each message is one command; each command
// gets exactly one reply `{ id, ok, result | error }`:
//
//   { id, cmd: 'load', url, client, sessions, concurrency, method, count, tokens, adopt, timeoutMs }
//       `count` unary calls of `method` ('heartbeat' | 'getConnections' | 'pushLogs'), at most
//       `concurrency` in flight, spread over `sessions` HTTP/2 sessions (kept per
//       url+client+sessions across commands). `client` is 'h2' (default: gRPC written directly
//       on node:http2, cheap) or 'connect' (the agent's stack: createClient over
//       createGrpcTransport, one transport per session). Worker w owns the tokens i with i % concurrency
//       == w (all workers share the list when it is shorter than `concurrency`) and cycles
//       through them, so one attempt is never in flight twice. With `adopt`, a worker replaces a
//       token by the heartbeat's renewed_token, as the agent does. With `ratePerS`, call i starts
//       no earlier than i / ratePerS seconds after the first (an open-loop pace, as agents that
//       heartbeat on a timer), instead of as fast as the server answers.
//   { id, cmd: 'sequence', url, client, method, tokens, timeoutMs }
//       one call per token, strictly one after another on one session; latency of each, in order.
//   { id, cmd: 'close', url }       closes the sessions to url
//   { id, cmd: 'exit' }             closes everything and exits
//
// Loopback only: the url must be http://127.0.0.1:<port>. Every loop is bounded by `count` (or
// the token list) and by `timeoutMs`.
import http2 from 'node:http2';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import {
  AgentService,
  GetConnectionsRequestSchema,
  GetConnectionsResponseSchema,
  HeartbeatRequestSchema,
  HeartbeatResponseSchema,
  PushLogsRequestSchema,
  PushLogsResponseSchema,
} from '@leoflow/protocol';

const CALL_TIMEOUT_MS = 10_000;
const ERROR_SAMPLES = 5;

/**
 * The agent session key the attempts were registered with (credential-plane.mjs
 * BENCH_SESSION_KEY): every attempt RPC after Register carries it, as a real agent's does.
 */
const SESSION_KEY = 'bench-agent-session-key';

/** url|client|sessions → clients (each on its own HTTP/2 session) */
const pools = new Map();

function clientsFor(url, kind, sessions) {
  if (!/^http:\/\/127\.0\.0\.1:\d+$/.test(url)) throw new Error(`not a loopback url: ${url}`);
  const key = `${url}|${kind}|${sessions}`;
  let pool = pools.get(key);
  if (!pool) {
    pool = Array.from({ length: sessions }, () =>
      kind === 'connect' ? connectClient(url) : h2Client(url),
    );
    pools.set(key, pool);
  }
  return pool;
}

// 'connect': the agent's own client stack (createClient over createGrpcTransport), one
// transport per session.
function connectClient(url) {
  const client = createClient(AgentService, createGrpcTransport({ baseUrl: url }));
  const opts = (token) => ({
    headers: { authorization: `Bearer ${token}`, 'leoflow-session': SESSION_KEY },
    timeoutMs: CALL_TIMEOUT_MS,
  });
  return {
    call(method, token) {
      switch (method) {
        case 'heartbeat':
          return client.heartbeat({ sentAtMs: BigInt(Date.now()) }, opts(token));
        case 'getConnections':
          return client.getConnections({}, opts(token));
        case 'pushLogs':
          return client.pushLogs({ lines: [] }, opts(token));
        default:
          return Promise.reject(new Error(`unknown method ${method}`));
      }
    },
    close() {},
  };
}

// 'h2': the same gRPC-over-HTTP/2 requests written directly on a node:http2 session —
// same path, headers, length-prefixed protobuf body, grpc-status trailers — at a fraction of
// the client stack's CPU, so that on a small machine the load generator leaves the server
// its core. The server cannot tell the two apart.
const METHODS = {
  heartbeat: ['Heartbeat', HeartbeatRequestSchema, HeartbeatResponseSchema, { sentAtMs: 1n }],
  getConnections: ['GetConnections', GetConnectionsRequestSchema, GetConnectionsResponseSchema, {}],
  pushLogs: ['PushLogs', PushLogsRequestSchema, PushLogsResponseSchema, { lines: [] }],
};
const FRAMED = Object.fromEntries(
  Object.entries(METHODS).map(([m, [name, reqSchema, resSchema, init]]) => {
    const msg = toBinary(reqSchema, create(reqSchema, init));
    const body = Buffer.alloc(5 + msg.length);
    body.writeUInt32BE(msg.length, 1);
    body.set(msg, 5);
    return [m, { path: `/${AgentService.typeName}/${name}`, body, resSchema }];
  }),
);

function h2Client(url) {
  let session = null;
  const open = () => {
    if (session && !session.closed && !session.destroyed) return session;
    session = http2.connect(url);
    session.on('error', () => undefined); // each stream reports its own failure
    return session;
  };
  return {
    call(method, token) {
      const m = FRAMED[method];
      if (!m) return Promise.reject(new Error(`unknown method ${method}`));
      return new Promise((resolve, reject) => {
        const req = open().request({
          ':method': 'POST',
          ':path': m.path,
          'content-type': 'application/grpc+proto',
          te: 'trailers',
          authorization: `Bearer ${token}`,
          'leoflow-session': SESSION_KEY,
        });
        const chunks = [];
        let status = null;
        let message = '';
        const timer = setTimeout(() => req.close(http2.constants.NGHTTP2_CANCEL), CALL_TIMEOUT_MS);
        const grpc = (h) => {
          if (h['grpc-status'] !== undefined) status = Number(h['grpc-status']);
          if (h['grpc-message'] !== undefined) message = decodeURIComponent(h['grpc-message']);
        };
        req.on('response', grpc);
        req.on('trailers', grpc);
        req.on('data', (c) => chunks.push(c));
        req.on('error', (err) => {
          clearTimeout(timer);
          reject(err);
        });
        req.on('close', () => {
          clearTimeout(timer);
          if (status !== 0) {
            reject(new ConnectError(message || 'no grpc-status', status ?? Code.Unknown));
            return;
          }
          const buf = Buffer.concat(chunks);
          try {
            if (buf.length < 5 || buf[0] !== 0 || buf.readUInt32BE(1) !== buf.length - 5)
              throw new Error('malformed gRPC response frame');
            resolve(fromBinary(m.resSchema, buf.subarray(5)));
          } catch (err) {
            reject(err);
          }
        });
        req.end(m.body);
      });
    },
    close() {
      session?.close();
    },
  };
}

/** What each response says, tallied: the parent checks it (renewal on/off, 20 URIs, …). */
function newChecks() {
  return {
    ok: 0,
    errors: 0,
    error_samples: [],
    renewed: 0,
    renewed_same_token: 0,
    should_terminate: 0,
    uris_min: null,
    uris_max: null,
    uri_ids: null,
  };
}

function tally(checks, method, res, sentToken) {
  checks.ok++;
  if (method === 'heartbeat') {
    if (res.renewedToken !== '') {
      checks.renewed++;
      if (res.renewedToken === sentToken) checks.renewed_same_token++;
    }
    if (res.shouldTerminate) checks.should_terminate++;
  } else if (method === 'getConnections') {
    const ids = Object.keys(res.connectionUris);
    checks.uris_min = checks.uris_min === null ? ids.length : Math.min(checks.uris_min, ids.length);
    checks.uris_max = checks.uris_max === null ? ids.length : Math.max(checks.uris_max, ids.length);
    // names only, never the URIs (they carry passwords)
    checks.uri_ids ??= ids.sort();
  }
}

function tallyError(checks, err) {
  checks.errors++;
  if (checks.error_samples.length < ERROR_SAMPLES) {
    const e = ConnectError.from(err);
    checks.error_samples.push(`${Code[e.code] ?? e.code}: ${e.rawMessage}`);
  }
}

async function load(msg) {
  const {
    url,
    client = 'h2',
    sessions,
    concurrency,
    method,
    count,
    tokens,
    adopt,
    timeoutMs,
    ratePerS,
  } = msg;
  if (!(count > 0 && concurrency > 0 && sessions > 0 && tokens.length > 0))
    throw new Error('load: count, concurrency, sessions and tokens must be positive');
  const clients = clientsFor(url, client, sessions);
  const deadline = performance.now() + timeoutMs;
  const latencies = new Float64Array(count);
  const checks = newChecks();
  const perWorker = Array.from({ length: concurrency }, (_, w) =>
    tokens.length >= concurrency ? tokens.filter((_, i) => i % concurrency === w) : [...tokens],
  );
  let next = 0;
  let timedOut = false;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const worker = async (w) => {
    const mine = perWorker[w];
    const c = clients[w % sessions];
    let k = w % mine.length;
    while (next < count) {
      if (performance.now() > deadline) {
        timedOut = true;
        return;
      }
      const i = next++;
      if (ratePerS > 0) {
        const due = t0 + (i * 1000) / ratePerS;
        const wait = due - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
      const slot = k;
      k = (k + 1) % mine.length;
      const token = mine[slot];
      const s = performance.now();
      try {
        const res = await c.call(method, token);
        latencies[i] = performance.now() - s;
        tally(checks, method, res, token);
        if (adopt && method === 'heartbeat' && res.renewedToken !== '')
          mine[slot] = res.renewedToken;
      } catch (err) {
        latencies[i] = performance.now() - s;
        tallyError(checks, err);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const done = Math.min(next, count);
  // With `adopt`, the tokens each attempt holds now, in the order given, for the next command
  // (an agent keeps its renewed token; starting again from the old ones would not).
  const adopted = adopt
    ? tokens.length >= concurrency
      ? tokens.map((_, i) => perWorker[i % concurrency][Math.floor(i / concurrency)])
      : null
    : null;
  return {
    count: done,
    timed_out: timedOut,
    ...(adopted ? { adopted_tokens: adopted } : {}),
    wall_ms: wall,
    per_s: (done * 1000) / wall,
    latency_ms: latencySummary(latencies.subarray(0, done)),
    // raw, for exact percentiles over several commands (IPC uses advanced serialization)
    latencies_ms: latencies.slice(0, done),
    client_cpu_us_per_call: (cpu.user + cpu.system) / Math.max(1, done),
    checks,
  };
}

async function sequence(msg) {
  const { url, client = 'h2', method, tokens, timeoutMs } = msg;
  const [c] = clientsFor(url, client, 1);
  const deadline = performance.now() + timeoutMs;
  const latencies = [];
  const checks = newChecks();
  for (const token of tokens) {
    if (performance.now() > deadline) break;
    const s = performance.now();
    try {
      const res = await c.call(method, token);
      latencies.push(performance.now() - s);
      tally(checks, method, res, token);
    } catch (err) {
      latencies.push(performance.now() - s);
      tallyError(checks, err);
    }
  }
  return { latencies_ms: latencies, timed_out: latencies.length < tokens.length, checks };
}

function latencySummary(xs) {
  if (xs.length === 0) return { p50: null, p90: null, p99: null, max: null, mean: null };
  const s = Float64Array.from(xs).sort();
  const at = (p) => s[Math.min(s.length, Math.max(1, Math.ceil((p / 100) * s.length))) - 1];
  let sum = 0;
  for (const x of s) sum += x;
  return { p50: at(50), p90: at(90), p99: at(99), max: s[s.length - 1], mean: sum / s.length };
}

function closeUrl(url) {
  // The connect transport has no close(); its sessions end when the server closes them.
  for (const [key, pool] of [...pools]) {
    if (!key.startsWith(`${url}|`)) continue;
    for (const c of pool) c.close();
    pools.delete(key);
  }
}

if (!process.send) {
  process.stderr.write('bench/rpc-load.mjs runs as a child of the bench (child_process.fork)\n');
  process.exit(2);
}
process.on('disconnect', () => process.exit(0));
process.on('message', (msg) => {
  void (async () => {
    try {
      let result;
      if (msg.cmd === 'load') result = await load(msg);
      else if (msg.cmd === 'sequence') result = await sequence(msg);
      else if (msg.cmd === 'close') result = closeUrl(msg.url);
      else if (msg.cmd === 'exit') {
        for (const pool of pools.values()) for (const c of pool) c.close();
        process.send({ id: msg.id, ok: true }, () => process.exit(0));
        return;
      } else throw new Error(`unknown command ${msg.cmd}`);
      process.send({ id: msg.id, ok: true, result });
    } catch (err) {
      process.send({ id: msg.id, ok: false, error: String(err?.stack ?? err) });
    }
  })();
});
process.send({ ready: true });
