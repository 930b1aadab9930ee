// api_auth: what authentication and authorization cost a REST request. A real `leoflow
// standalone` process; the load generator (keep-alive HTTP/1.1, C concurrent) in this process.
// Baseline: GET /api/v1/health (public, no token). Against it, in the same run and ABBA order:
// GET /api/v1/whoami (token verified: EdDSA signature, jti on record and unrevoked, role →
// permissions), GET /api/v1/dags (the same plus a tenant-scoped query) and a viewer's refused
// POST /api/v1/dags (403 plus the authz.denied audit write).
import http from 'node:http';
import { api, log, percentile, ratio, round, startStandalone } from './lib.mjs';

const TARGET_RATIO = 0.5;

export const description =
  'REST requests/s and latency with token authentication + authorization (whoami, dags list, a refused write) beside the public health route, same server, same run; SQLite';

export async function run({ quick }) {
  const count = quick ? 2_000 : 20_000;
  const concurrency = 16;
  const sa = await startStandalone({ label: 'api-auth' });
  const viewer = (await api(sa, 'POST', '/api/v1/tokens', { role: 'viewer', name: 'bench-viewer' }))
    .token;
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });

  const variants = {
    health: { method: 'GET', path: '/api/v1/health', token: null, expect: 200 },
    whoami: { method: 'GET', path: '/api/v1/whoami', token: sa.token, expect: 200 },
    dags_list: { method: 'GET', path: '/api/v1/dags', token: sa.token, expect: 200 },
    refused_write: {
      method: 'POST',
      path: '/api/v1/dags',
      token: viewer,
      expect: 403,
      body: '{}',
    },
  };

  const once = (v) =>
    new Promise((res, rej) => {
      const t0 = process.hrtime.bigint();
      const req = http.request(
        `${sa.url}${v.path}`,
        {
          method: v.method,
          agent,
          headers: {
            ...(v.token ? { authorization: `Bearer ${v.token}` } : {}),
            ...(v.body ? { 'content-type': 'application/json' } : {}),
          },
        },
        (r) => {
          r.resume();
          r.on('end', () => {
            if (r.statusCode !== v.expect) rej(new Error(`${v.path}: HTTP ${r.statusCode}`));
            else res(Number(process.hrtime.bigint() - t0) / 1e6);
          });
        },
      );
      req.on('error', rej);
      req.end(v.body);
    });

  const load = async (name, n) => {
    const v = variants[name];
    const lat = [];
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next++ < n) lat.push(await once(v));
      }),
    );
    return { n: lat.length, ms: performance.now() - t0, lat };
  };

  try {
    log('api_auth: warm-up');
    for (const name of Object.keys(variants)) await load(name, Math.min(500, count / 10));
    const acc = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
    // ABBA halves: baseline and measured alternate so drift hits both alike.
    const order = [...Object.keys(variants), ...Object.keys(variants).reverse()];
    for (const name of order) {
      log(`api_auth: ${count / 2} × ${name}, ${concurrency} concurrent`);
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
            latency_ms: {
              p50: round(percentile(lat, 50), 2),
              p99: round(percentile(lat, 99), 2),
            },
          },
        ];
      }),
    );
    const r = ratio(stats.whoami.per_s, stats.health.per_s);
    return {
      description,
      concurrency,
      requests_per_variant: count,
      baseline: stats.health,
      whoami: stats.whoami,
      dags_list: stats.dags_list,
      refused_write: stats.refused_write,
      ratio_whoami_to_health: r,
      ratio_dags_list_to_health: ratio(stats.dags_list.per_s, stats.health.per_s),
      ratio_refused_to_health: ratio(stats.refused_write.per_s, stats.health.per_s),
      target: { ratio_whoami_to_health_min: TARGET_RATIO },
      meets_target: r !== null && r >= TARGET_RATIO,
    };
  } finally {
    agent.destroy();
    await sa.stop();
  }
}
