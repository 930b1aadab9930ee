// door_401: what a refused runner token costs the door. A real door (packages/server/dist) on a
// real SQLite directory, in this process, with a counting cell client and counting directory
// reads; the load generator (keep-alive HTTP/1.1, C concurrent) here too. Baseline: a path
// outside the door's grammar (404, no lookup). Against it, in the same run and ABBA order: an
// unknown well-formed token (401), a near-miss of a real token (401: last character changed) and
// the real token's login (200). Reports requests/s, p50/p99, directory reads and cell calls per
// request (the 401s must make none of the latter and no write: the door has no write at all).
import http from 'node:http';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { insertBenchRunner } from './door-runner.mjs';
import { REPO, log, percentile, ratio, round, tempDir } from './lib.mjs';

const dist = (p) => pathToFileURL(join(REPO, 'packages/server/dist', p)).href;
const TARGET_RATIO = 0.5;

export const description =
  "door requests/s and latency for refused tokens (unknown, near-miss) and a good login beside the 404 of a path outside the door's grammar, same door, same run; SQLite directory";

export async function run({ quick }) {
  const count = quick ? 2_000 : 20_000;
  const concurrency = 16;
  const { openDirectory } = await import(dist('store/kysely-directory.js'));
  const { createDoor, listenDoor } = await import(dist('door/door.js'));
  const { mintRunnerToken, runnerTokenHash } = await import(dist('runners/runner-token.js'));
  const { pino } = await import('pino');
  const data = tempDir('leoflow-bench-door-');
  const directory = await openDirectory({ kind: 'sqlite', file: join(data.dir, 'directory.db') });
  await directory.migrate();
  const token = mintRunnerToken();
  await insertBenchRunner(directory, token, runnerTokenHash);
  const reads = { n: 0 };
  const counted =
    (name) =>
    (...a) => {
      reads.n += 1;
      return directory[name](...a);
    };
  const cellCalls = { n: 0 };
  const door = createDoor({
    directory: {
      runnerByTokenHash: counted('runnerByTokenHash'),
      runnerById: counted('runnerById'),
      getPlacement: counted('getPlacement'),
      getCell: counted('getCell'),
    },
    topology: { kind: 'lite', url: 'http://127.0.0.1:9' },
    cells: {
      fetchSecret: async () => {
        cellCalls.n += 1;
        throw new Error('no cell in this benchmark');
      },
      openSession: async () => {
        cellCalls.n += 1;
        throw new Error('no cell in this benchmark');
      },
    },
    clock: { now: () => Date.now() },
    logger: pino({ level: 'warn' }),
    bundleFile: null,
    // every request comes from 127.0.0.1: the throttle would turn the 401s into no-lookup 401s
    throttle: { limit: Number.MAX_SAFE_INTEGER, windowMs: 60_000 },
  });
  const port = await listenDoor(door, '127.0.0.1', 0);
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const near = token.slice(0, -1) + (token.endsWith('A') ? 'B' : 'A');
  const variants = {
    not_found: { path: `/runners/${token}/nope`, expect: 404 },
    unknown_401: { path: `/runners/lfr_${'A'.repeat(43)}/login`, expect: 401 },
    near_miss_401: { path: `/runners/${near}/login`, expect: 401 },
    login_200: { path: `/runners/${token}/login`, expect: 200 },
  };
  const once = (v) =>
    new Promise((res, rej) => {
      const t0 = process.hrtime.bigint();
      const req = http.request({ host: '127.0.0.1', port, path: v.path, agent }, (r) => {
        r.resume();
        r.on('end', () => {
          if (r.statusCode !== v.expect)
            rej(new Error(`${v.expect} expected, got ${r.statusCode}`));
          else res(Number(process.hrtime.bigint() - t0) / 1e6);
        });
      });
      req.on('error', rej);
      req.end();
    });
  const load = async (name, n) => {
    const v = variants[name];
    const lat = [];
    let next = 0;
    const r0 = reads.n;
    const c0 = cellCalls.n;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next++ < n) lat.push(await once(v));
      }),
    );
    return { lat, ms: performance.now() - t0, reads: reads.n - r0, cells: cellCalls.n - c0 };
  };
  try {
    log('door_401: warm-up');
    for (const name of Object.keys(variants)) await load(name, Math.min(500, count / 10));
    const acc = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
    const order = [...Object.keys(variants), ...Object.keys(variants).reverse()];
    for (const name of order) {
      log(`door_401: ${count / 2} × ${name}, ${concurrency} concurrent`);
      acc[name].push(await load(name, count / 2));
    }
    const stats = Object.fromEntries(
      Object.entries(acc).map(([name, parts]) => {
        const lat = parts.flatMap((p) => p.lat);
        const ms = parts.reduce((a, p) => a + p.ms, 0);
        return [
          name,
          {
            count: lat.length,
            per_s: Math.round((lat.length / ms) * 1000),
            latency_ms: { p50: round(percentile(lat, 50), 3), p99: round(percentile(lat, 99), 3) },
            directory_reads_per_request: round(
              parts.reduce((a, p) => a + p.reads, 0) / lat.length,
              2,
            ),
            cell_calls: parts.reduce((a, p) => a + p.cells, 0),
          },
        ];
      }),
    );
    const r = ratio(stats.unknown_401.per_s, stats.not_found.per_s);
    const noCellCalls =
      stats.unknown_401.cell_calls === 0 &&
      stats.near_miss_401.cell_calls === 0 &&
      stats.not_found.cell_calls === 0;
    return {
      description,
      concurrency,
      requests_per_variant: count,
      baseline: stats.not_found,
      unknown_401: stats.unknown_401,
      near_miss_401: stats.near_miss_401,
      login_200: stats.login_200,
      ratio_unknown_401_to_404: r,
      ratio_near_miss_to_unknown_p50: ratio(
        stats.near_miss_401.latency_ms.p50,
        stats.unknown_401.latency_ms.p50,
      ),
      ratio_login_to_404: ratio(stats.login_200.per_s, stats.not_found.per_s),
      target: { ratio_unknown_401_to_404_min: TARGET_RATIO, cell_calls_on_refusals: 0 },
      meets_target: r !== null && r >= TARGET_RATIO && noCellCalls,
    };
  } finally {
    agent.destroy();
    await door.close();
    await directory.close();
  }
}
