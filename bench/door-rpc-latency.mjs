// door_rpc_latency: an agent RPC (unary Heartbeat, gRPC over HTTP/2) through a runner's door
// session — runner → door → cell endpoint → the cell's HTTP/2 session server — against the same
// RPC on the agent port directly, same service and gate, same process, same run, ABBA order.
// Reports p50/p99 of each and the overhead; goal: ≤ 2 ms added at p99.
import { percentile, round, log } from './lib.mjs';
import { runnerSessionClient } from './door-runner.mjs';
import { BEARER, startDoorStack } from './door-stack.mjs';

export const description =
  'unary agent RPC latency through a runner door session (HTTP/2 over WebSocket, door + cell endpoint) vs the agent port directly; same service, same run';

const TARGET_P99_OVERHEAD_MS = 2;

export async function run({ quick }) {
  const calls = quick ? 200 : 5_000;
  const { createClient } = await import('@connectrpc/connect');
  const { createGrpcTransport } = await import('@connectrpc/connect-node');
  const { AgentService } = await import('@leoflow/protocol');
  const stack = await startDoorStack();
  const headers = { authorization: `Bearer ${BEARER}` };
  const direct = createClient(AgentService, createGrpcTransport({ baseUrl: stack.directUrl }));
  const session = runnerSessionClient(stack.sessionUrl);
  const viaDoor = session.client;
  const measure = async (client, n) => {
    const lat = [];
    for (let i = 0; i < n; i++) {
      const t0 = process.hrtime.bigint();
      await client.heartbeat({ sentAtMs: BigInt(i) }, { headers });
      lat.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    return lat;
  };
  try {
    log('door_rpc_latency: warm-up');
    await measure(direct, 50);
    await measure(viaDoor, 50);
    const acc = { direct: [], door: [] };
    for (const which of ['direct', 'door', 'door', 'direct']) {
      log(`door_rpc_latency: ${calls / 2} × Heartbeat, ${which}`);
      acc[which].push(...(await measure(which === 'direct' ? direct : viaDoor, calls / 2)));
    }
    const stat = (lat) => ({
      count: lat.length,
      p50_ms: round(percentile(lat, 50), 3),
      p99_ms: round(percentile(lat, 99), 3),
    });
    const baseline = stat(acc.direct);
    const door = stat(acc.door);
    const overheadP99 = round(door.p99_ms - baseline.p99_ms, 3);
    return {
      description,
      baseline,
      through_door: door,
      overhead_ms: { p50: round(door.p50_ms - baseline.p50_ms, 3), p99: overheadP99 },
      ratio_p50: baseline.p50_ms > 0 ? round(door.p50_ms / baseline.p50_ms, 2) : null,
      ratio_p99: baseline.p99_ms > 0 ? round(door.p99_ms / baseline.p99_ms, 2) : null,
      target: { p99_overhead_ms_max: TARGET_P99_OVERHEAD_MS },
      meets_target: overheadP99 <= TARGET_P99_OVERHEAD_MS,
    };
  } finally {
    session.close();
    await stack.close();
  }
}
