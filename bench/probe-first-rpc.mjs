// Profiling aid for inter_task_latency, run as a fresh process the way an agent starts:
// load the same RPC stack the agent loads, then make unary calls to the agent RPC port with a
// bearer that is not a token (the server refuses it at once, before any store access).
// Prints one JSON line of phase times (ms since this process started).
//
//   node bench/probe-first-rpc.mjs http://127.0.0.1:<agent-port>
const t0 = performance.now(); // boot: process start → first line of this script

const url = process.argv[2];
if (!url || !/^http:\/\/127\.0\.0\.1:\d+$/.test(url)) {
  process.stderr.write('usage: node bench/probe-first-rpc.mjs http://127.0.0.1:<agent-port>\n');
  process.exit(2);
}

const [{ createClient, ConnectError }, { createGrpcTransport }, { AgentService }] =
  await Promise.all([
    import('@connectrpc/connect'),
    import('@connectrpc/connect-node'),
    import('@leoflow/protocol'),
  ]);
const t1 = performance.now(); // modules loaded

const transport = createGrpcTransport({
  baseUrl: url,
  interceptors: [
    (next) => async (req) => {
      req.header.set('authorization', 'Bearer not-a-token');
      return next(req);
    },
  ],
});
const client = createClient(AgentService, transport);

async function refusedCall() {
  try {
    await client.register(
      { agentVersion: 'bench-probe', hostname: 'bench', pid: process.pid },
      { timeoutMs: 10_000 },
    );
    return 'accepted';
  } catch (err) {
    return ConnectError.from(err).code; // 16 = Unauthenticated expected
  }
}
const code1 = await refusedCall();
const t2 = performance.now(); // first RPC answered (connect + HTTP/2 session + lazy init + round trip)
const code2 = await refusedCall();
const t3 = performance.now(); // a warm RPC on the same session

process.stdout.write(
  `${JSON.stringify({
    boot_ms: t0,
    module_load_ms: t1 - t0,
    first_rpc_ms: t2 - t1,
    warm_rpc_ms: t3 - t2,
    total_ms: t3,
    codes: [code1, code2],
  })}\n`,
);
process.exit(0);
