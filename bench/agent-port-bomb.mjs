// agent_port_bomb: the standalone's RSS while anonymous callers send its agent port a ~1 MB gzip
// body that inflates to 1 GiB, and a message whose prefix declares 400 MB; the baseline is the
// same process's RSS just before, idle.
import http2 from 'node:http2';
import zlib from 'node:zlib';
import { log, procMem, round, sleep, startStandalone } from './lib.mjs';

const TARGET_GROWTH_MB = 50;
const PUSH_LOGS = '/leoflow.agent.v1.AgentService/PushLogs';

export const description =
  'standalone VmRSS growth (peak sampled every 10 ms, and VmHWM) while the agent port receives gzip bombs (1 GiB inflated) and 400 MB-declared messages without a token, beside its idle RSS just before';

async function gzipBomb(inflatedBytes) {
  const gz = zlib.createGzip({ level: 9 });
  const parts = [];
  gz.on('data', (b) => parts.push(b));
  const done = new Promise((r) => gz.once('end', r));
  const zeros = Buffer.alloc(1024 * 1024);
  for (let i = 0; i < inflatedBytes / zeros.length; i++) {
    if (!gz.write(zeros)) await new Promise((r) => gz.once('drain', r));
  }
  gz.end();
  await done;
  return Buffer.concat(parts);
}

function envelope(flags, length) {
  const b = Buffer.alloc(5);
  b.writeUInt8(flags, 0);
  b.writeUInt32BE(length, 1);
  return b;
}

/** One call; resolves the gRPC status (or 'no-status') once the stream closes or after 30 s. */
function send(agentUrl, { encoding, body }) {
  return new Promise((resolve) => {
    const session = http2.connect(agentUrl);
    session.on('error', () => undefined);
    const headers = {
      ':method': 'POST',
      ':path': PUSH_LOGS,
      'content-type': 'application/grpc',
      te: 'trailers',
    };
    if (encoding) headers['grpc-encoding'] = encoding;
    const stream = session.request(headers);
    let status = 'no-status';
    const take = (h) => {
      if (h['grpc-status'] !== undefined) status = Number(h['grpc-status']);
    };
    stream.on('response', take);
    stream.on('trailers', take);
    stream.on('data', () => undefined);
    stream.on('error', () => undefined);
    const timer = setTimeout(() => stream.close(), 30_000);
    stream.on('close', () => {
      clearTimeout(timer);
      session.close();
      resolve(status);
    });
    stream.end(body);
  });
}

export async function run({ quick }) {
  const rounds = quick ? 2 : 5;
  const concurrent = quick ? 4 : 8;
  log('agent_port_bomb: building a 1 GiB gzip bomb');
  const bomb = await gzipBomb(1024 * 1024 * 1024);
  const bombBody = Buffer.concat([envelope(1, bomb.length), bomb]);
  const bigBody = Buffer.concat([envelope(0, 400 * 1024 * 1024), Buffer.alloc(1024 * 1024, 0x41)]);

  const sa = await startStandalone({ label: 'agent-port-bomb' });
  try {
    if (!sa.agentUrl) throw new Error('standalone did not print its agent RPC URL');
    await sleep(2_000);
    const before = procMem(sa.pid);
    if (!before) throw new Error('could not read the standalone RSS');
    let peakKb = before.rss_kb;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const m = procMem(sa.pid);
        if (m?.rss_kb) peakKb = Math.max(peakKb, m.rss_kb);
        await sleep(10);
      }
    })();
    const statuses = {};
    const t0 = Date.now();
    for (let r = 0; r < rounds; r++) {
      log(
        `agent_port_bomb: round ${r + 1}/${rounds}: ${concurrent} bombs + ${concurrent} oversize, concurrently`,
      );
      const calls = [];
      for (let i = 0; i < concurrent; i++) {
        calls.push(send(sa.agentUrl, { encoding: 'gzip', body: bombBody }));
        calls.push(send(sa.agentUrl, { body: bigBody }));
      }
      for (const s of await Promise.all(calls)) statuses[s] = (statuses[s] ?? 0) + 1;
    }
    const elapsedMs = Date.now() - t0;
    await sleep(200);
    sampling = false;
    await sampler;
    const after = procMem(sa.pid);
    const growthMb = round((peakKb - before.rss_kb) / 1024, 1);
    const hwmGrowthMb =
      after?.hwm_kb && before.hwm_kb
        ? round((after.hwm_kb - Math.max(before.hwm_kb, before.rss_kb)) / 1024, 1)
        : null;
    return {
      description,
      bomb: { compressed_bytes: bomb.length, inflated_bytes: 1024 * 1024 * 1024 },
      oversize: { declared_bytes: 400 * 1024 * 1024, sent_bytes: bigBody.length },
      requests: rounds * concurrent * 2,
      grpc_statuses: statuses,
      elapsed_ms: elapsedMs,
      baseline: {
        idle_rss_mb: round(before.rss_kb / 1024, 1),
        idle_hwm_mb: round(before.hwm_kb / 1024, 1),
      },
      peak_rss_mb: round(peakKb / 1024, 1),
      rss_growth_mb: growthMb,
      hwm_growth_mb: hwmGrowthMb,
      target: { rss_growth_mb_max: TARGET_GROWTH_MB },
      meets_target: growthMb < TARGET_GROWTH_MB,
    };
  } finally {
    await sa.stop();
  }
}
