import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { CredentialMetrics, SECRET_RPC_BUCKETS_SECONDS } from '../../src/rpc/credential-metrics.js';
import { startMetricsServer, type MetricsServer } from '../../src/util/metrics-server.js';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/**
 * A strict reader of the Prometheus text format (0.0.4): every line is a HELP/TYPE comment or a
 * sample; every sample belongs to a family announced by TYPE. Throws on anything else.
 */
function parseExposition(text: string): { types: Map<string, string>; samples: Sample[] } {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  // Prometheus parses values with Go's ParseFloat, which takes NaN in any case (prom-client
  // writes "Nan" for an empty event-loop histogram).
  const sampleRe =
    /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? ((?:-?[0-9.e+-]+|[Nn][Aa][Nn]|[+-]Inf))( -?\d+)?$/;
  const labelRe = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const type =
      /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (type?.[1] && type[2]) {
      types.set(type[1], type[2]);
      continue;
    }
    if (/^# HELP [a-zA-Z_:][a-zA-Z0-9_:]* .*$/.test(line)) continue;
    const m = sampleRe.exec(line);
    if (!m?.[1] || m[4] === undefined) throw new Error(`unparseable exposition line: ${line}`);
    const labels: Record<string, string> = {};
    const rawLabels = m[3] ?? '';
    for (const l of rawLabels.matchAll(labelRe)) labels[l[1] ?? ''] = l[2] ?? '';
    const family = m[1].replace(/_(bucket|sum|count)$/, '');
    if (!types.has(m[1]) && !types.has(family)) throw new Error(`sample without TYPE: ${line}`);
    samples.push({
      name: m[1],
      labels,
      value: /^nan$/i.test(m[4]) ? Number.NaN : Number(m[4].replace('Inf', 'Infinity')),
    });
  }
  return { types, samples };
}

function value(
  samples: Sample[],
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  return samples.find(
    (s) =>
      s.name === name &&
      Object.keys(labels).length === Object.keys(s.labels).length &&
      Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  )?.value;
}

describe('CredentialMetrics', () => {
  it('exposes every series at zero from the start', async () => {
    const m = new CredentialMetrics({ defaultMetrics: false });
    const { types, samples } = parseExposition(await m.registry.metrics());
    expect(types.get('leoflow_secret_deliveries_total')).toBe('counter');
    expect(types.get('leoflow_secret_denied_total')).toBe('counter');
    expect(types.get('leoflow_secret_would_deny_total')).toBe('counter');
    expect(types.get('leoflow_credential_renewals_total')).toBe('counter');
    expect(types.get('leoflow_credential_ceiling_stopped_total')).toBe('counter');
    expect(types.get('leoflow_secret_rpc_seconds')).toBe('histogram');
    for (const kind of ['variables', 'connections']) {
      expect(value(samples, 'leoflow_secret_deliveries_total', { kind })).toBe(0);
      expect(value(samples, 'leoflow_secret_would_deny_total', { kind })).toBe(0);
      for (const reason of ['not_live', 'revoked', 'expired', 'invalid', 'insecure_channel']) {
        expect(value(samples, 'leoflow_secret_denied_total', { kind, reason })).toBe(0);
      }
      expect(value(samples, 'leoflow_secret_rpc_seconds_count', { kind })).toBe(0);
    }
    expect(value(samples, 'leoflow_credential_renewals_total')).toBe(0);
    expect(value(samples, 'leoflow_credential_ceiling_stopped_total')).toBe(0);
    expect(types.get('leoflow_attempt_registrations_total')).toBe('counter');
    for (const via of ['rpc', 'handoff'])
      for (const outcome of ['registered', 'terminate'])
        expect(value(samples, 'leoflow_attempt_registrations_total', { via, outcome })).toBe(0);
  });

  it('counters move and the text exposition parses', async () => {
    const m = new CredentialMetrics({ defaultMetrics: false });
    m.delivered('variables');
    m.delivered('variables');
    m.delivered('connections');
    m.denied('connections', 'not_live');
    m.denied('variables', 'revoked');
    m.denied('variables', 'expired');
    m.denied('variables', 'invalid');
    m.denied('connections', 'insecure_channel');
    m.wouldDeny('connections');
    m.renewed();
    m.renewal('renewed');
    m.renewal('renewed');
    m.renewal('ceiling_stopped');
    const end = m.timeSecretRpc('variables');
    end();
    m.latency('connections', 0.0003);
    m.latency('connections', 0.2);

    const { samples } = parseExposition(await m.registry.metrics());
    expect(value(samples, 'leoflow_secret_deliveries_total', { kind: 'variables' })).toBe(2);
    expect(value(samples, 'leoflow_secret_deliveries_total', { kind: 'connections' })).toBe(1);
    expect(
      value(samples, 'leoflow_secret_denied_total', { kind: 'connections', reason: 'not_live' }),
    ).toBe(1);
    expect(
      value(samples, 'leoflow_secret_denied_total', { kind: 'variables', reason: 'revoked' }),
    ).toBe(1);
    expect(
      value(samples, 'leoflow_secret_denied_total', { kind: 'variables', reason: 'not_live' }),
    ).toBe(0);
    expect(
      value(samples, 'leoflow_secret_denied_total', {
        kind: 'connections',
        reason: 'insecure_channel',
      }),
    ).toBe(1);
    expect(value(samples, 'leoflow_secret_would_deny_total', { kind: 'connections' })).toBe(1);
    expect(value(samples, 'leoflow_credential_renewals_total')).toBe(3);
    expect(value(samples, 'leoflow_credential_ceiling_stopped_total')).toBe(1);
    expect(value(samples, 'leoflow_secret_rpc_seconds_count', { kind: 'variables' })).toBe(1);
    expect(value(samples, 'leoflow_secret_rpc_seconds_count', { kind: 'connections' })).toBe(2);
    // 0.3 ms lands in the 0.5 ms bucket, 200 ms only from 250 ms up.
    expect(
      value(samples, 'leoflow_secret_rpc_seconds_bucket', { kind: 'connections', le: '0.0005' }),
    ).toBe(1);
    expect(
      value(samples, 'leoflow_secret_rpc_seconds_bucket', { kind: 'connections', le: '0.1' }),
    ).toBe(1);
    expect(
      value(samples, 'leoflow_secret_rpc_seconds_bucket', { kind: 'connections', le: '0.25' }),
    ).toBe(2);
    expect(
      value(samples, 'leoflow_secret_rpc_seconds_bucket', { kind: 'connections', le: '+Inf' }),
    ).toBe(2);
  });

  it('buckets resolve sub-millisecond through 100 ms', () => {
    expect(SECRET_RPC_BUCKETS_SECONDS[0]).toBeLessThan(0.001);
    expect(SECRET_RPC_BUCKETS_SECONDS).toContain(0.1);
    expect([...SECRET_RPC_BUCKETS_SECONDS].sort((a, b) => a - b)).toEqual(
      SECRET_RPC_BUCKETS_SECONDS,
    );
  });

  it('includes default process metrics, on its own registry (two instances do not collide)', async () => {
    const a = new CredentialMetrics();
    const b = new CredentialMetrics();
    a.renewed();
    const { types, samples } = parseExposition(await a.registry.metrics());
    expect(types.has('process_cpu_user_seconds_total')).toBe(true);
    expect(types.has('nodejs_heap_size_used_bytes')).toBe(true);
    expect(value(samples, 'leoflow_credential_renewals_total')).toBe(1);
    const other = parseExposition(await b.registry.metrics());
    expect(value(other.samples, 'leoflow_credential_renewals_total')).toBe(0);
  });

  it('carries no label that could hold a tenant, task or secret name', async () => {
    const m = new CredentialMetrics({ defaultMetrics: false });
    const { samples } = parseExposition(await m.registry.metrics());
    const labelNames = new Set(samples.flatMap((s) => Object.keys(s.labels)));
    // outcome: the token exchange's fixed classes (attempt, worker, a refusal class) and a
    // registration's (registered, terminate); via: rpc or handoff — never a name
    expect(labelNames).toEqual(new Set(['kind', 'reason', 'le', 'outcome', 'via']));
    m.exchanged('not_live');
    const after = parseExposition(await m.registry.metrics()).samples;
    expect(new Set(after.flatMap((s) => (s.labels.outcome ? [s.labels.outcome] : [])))).toEqual(
      new Set(['attempt', 'worker', 'not_live', 'registered', 'terminate']),
    );
    expect(new Set(after.flatMap((s) => (s.labels.via ? [s.labels.via] : [])))).toEqual(
      new Set(['rpc', 'handoff']),
    );
  });
});

describe('startMetricsServer', () => {
  let server: MetricsServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  function get(port: number, path: string, method = 'GET') {
    return new Promise<{ status: number; type: string; body: string }>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path, method }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), body }),
        );
      });
      req.on('error', reject);
      req.end();
    });
  }

  it('serves GET /metrics in the Prometheus text format', async () => {
    const m = new CredentialMetrics();
    m.delivered('connections');
    server = await startMetricsServer(m.registry, '127.0.0.1', 0);
    expect(server.port).toBeGreaterThan(0);
    const res = await get(server.port, '/metrics');
    expect(res.status).toBe(200);
    expect(res.type).toMatch(/^text\/plain; version=0\.0\.4/);
    const { samples } = parseExposition(res.body);
    expect(value(samples, 'leoflow_secret_deliveries_total', { kind: 'connections' })).toBe(1);
    expect((await get(server.port, '/metrics?debug=1')).status).toBe(200);
    const head = await get(server.port, '/metrics', 'HEAD');
    expect(head.status).toBe(200);
    expect(head.body).toBe('');
  });

  it('serves nothing else', async () => {
    const m = new CredentialMetrics({ defaultMetrics: false });
    server = await startMetricsServer(m.registry, '127.0.0.1', 0);
    for (const path of [
      '/',
      '/metrics/',
      '/metrics/x',
      '/api/v1/dags',
      '/health',
      '/METRICS',
      '//metrics',
    ]) {
      const res = await get(server.port, path);
      expect({ path, status: res.status }).toEqual({ path, status: 404 });
      expect(res.body).not.toContain('leoflow_');
    }
    for (const method of ['POST', 'PUT', 'DELETE']) {
      expect((await get(server.port, '/metrics', method)).status).toBe(404);
    }
  });

  it('close() releases the port', async () => {
    const m = new CredentialMetrics({ defaultMetrics: false });
    const s = await startMetricsServer(m.registry, '127.0.0.1', 0);
    await s.close();
    await expect(get(s.port, '/metrics')).rejects.toThrow(/ECONNREFUSED/);
  });

  it('fails to start on a port already taken', async () => {
    const m = new CredentialMetrics({ defaultMetrics: false });
    server = await startMetricsServer(m.registry, '127.0.0.1', 0);
    await expect(startMetricsServer(m.registry, '127.0.0.1', server.port)).rejects.toThrow(
      /EADDRINUSE/,
    );
  });
});
