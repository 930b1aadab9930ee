// Profiling aid (not part of run.mjs): one RPC under load against the bench's plane (SQLite,
// enforce/enforce, 20 declared connections), the server sampled by the V8 profiler at 100 µs;
// prints the server's CPU per call, then self time per function (µs per call), heaviest first.
//
//   node bench/profile-rpc.mjs <pushLogs|heartbeat|getConnections|bare> [calls] [rows]
//   PARENTS=fnA,fnB node bench/profile-rpc.mjs …   also: the callers of those functions
import { Session } from 'node:inspector/promises';
import {
  assemblePlane,
  dagSpec,
  launchAttempts,
  serverSide,
  startLoadGenerator,
  startServer,
  taskSpec,
  startBareHttp2,
} from './credential-plane.mjs';
import { cleanupAll } from './lib.mjs';
const method = process.argv[2] ?? 'pushLogs';
const n = Number(process.argv[3] ?? 4000);
const plane = await assemblePlane({ label: 'prof', scoping: 'enforce', liveness: 'enforce' });
const server = await startServer(plane, plane.service(1), 'prof');
const declared = [];
for (let i = 0; i < 20; i++) {
  const id = `conn_${i}`;
  declared.push(id);
  await plane.vault.setConnection(
    'default',
    id,
    {
      conn_type: 'postgres',
      host: `h${i}.example.com`,
      login: 'u',
      password: 'p/+:@%xyz',
      schema: 's',
      port: 5432,
      extra: { sslmode: 'require' },
    },
    'd',
    plane.clock.now(),
  );
}
const [launch] = await launchAttempts(
  plane,
  dagSpec({
    dag_id: 'p',
    connections: declared,
    tasks: [taskSpec('t', { connections: declared })],
  }),
  1,
  server.url,
);
plane.clock.advance(5000);
const bare = await startBareHttp2('stream');
const gen = await startLoadGenerator();
const url = method === 'bare' ? bare.url : server.url;
const m = method === 'bare' ? 'pushLogs' : method;
const load = (count) =>
  serverSide(plane, () =>
    gen.send({
      cmd: 'load',
      url,
      client: 'h2',
      sessions: 4,
      concurrency: 64,
      method: m,
      count,
      tokens: [launch.token],
      adopt: false,
      timeoutMs: 120000,
    }),
  );
await load(2000);
const s = new Session();
s.connect();
await s.post('Profiler.enable');
await s.post('Profiler.setSamplingInterval', { interval: 100 });
await s.post('Profiler.start');
const r = await load(n);
const { profile } = await s.post('Profiler.stop');
console.log(
  'per_s',
  Math.round(r.per_s),
  'cpu_us',
  r.server.cpu_us_per_call,
  'errors',
  r.checks.errors,
  r.checks.error_samples,
);
const byId = new Map(profile.nodes.map((x) => [x.id, x]));
const self = new Map();
for (let i = 0; i < profile.samples.length; i++) {
  const nd = byId.get(profile.samples[i]);
  const cf = nd.callFrame;
  const key = `${cf.functionName || '(anon)'} ${cf.url.replace(/.*node_modules\//, '').replace(/.*wt-kube\//, '')}:${cf.lineNumber}`;
  self.set(key, (self.get(key) ?? 0) + (profile.timeDeltas[i] ?? 0));
}
const rows = [...self].filter(([k]) => !k.startsWith('(idle)')).sort((a, b) => b[1] - a[1]);
const total = rows.reduce((a, [, v]) => a + v, 0);
console.log('busy us/call', (total / n).toFixed(1));
for (const [k, v] of rows.slice(0, Number(process.argv[4] ?? 45)))
  console.log((v / n).toFixed(2).padStart(8), k);
const parent = new Map();
for (const x of profile.nodes) for (const c of x.children ?? []) parent.set(c, x.id);
for (const want of (process.env.PARENTS ?? '').split(',').filter(Boolean)) {
  const agg = new Map();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i];
    if (byId.get(id).callFrame.functionName !== want) continue;
    const chain = [];
    for (let c = parent.get(id); c !== undefined && chain.length < 5; c = parent.get(c)) {
      const f = byId.get(c).callFrame;
      chain.push(`${f.functionName || '(anon)'}@${f.url.split('/').pop()}:${f.lineNumber}`);
    }
    const k = chain.join(' < ');
    agg.set(k, (agg.get(k) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  console.log('== parents of', want);
  for (const [k, v] of [...agg].sort((a, b) => b[1] - a[1]).slice(0, 6))
    console.log((v / n).toFixed(2).padStart(8), k);
}
await gen.send({ cmd: 'exit' }).catch(() => {});
await cleanupAll();
process.exit(0);
