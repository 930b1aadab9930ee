// What the door benchmarks share about a runner: its directory row, and a runner-side client
// (a WebSocket session through the door, HTTP/2 on top) as the daemon opens one.
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport, Http2SessionManager } from '@connectrpc/connect-node';
import { AgentService } from '@leoflow/protocol';
import { createWebSocketStream, WebSocket } from 'ws';

/** Inserts an inbound runner of tenant `default` with this token (its hash) into the directory. */
export async function insertBenchRunner(directory, token, runnerTokenHash) {
  await directory.insertRunner({
    id: 'rnr_bench',
    tenant_id: 'default',
    name: 'bench',
    kind: 'inbound',
    labels: {},
    capacity: 1,
    ssh: null,
    token_hash: runnerTokenHash(token),
    token_cipher: new Uint8Array([1]),
    token_key_id: 'k',
    created_by: 'bench',
    created_at: Date.now(),
  });
}

/** An agent-service client over one door session (`ws://…/runners/<token>/session`). */
export function runnerSessionClient(sessionUrl) {
  const ws = new WebSocket(sessionUrl);
  // attached before 'open': the cell speaks first
  const stream = createWebSocketStream(ws);
  const sessionManager = new Http2SessionManager('http://runner-session', undefined, {
    createConnection: () => stream,
  });
  const client = createClient(
    AgentService,
    createGrpcTransport({ baseUrl: 'http://runner-session', sessionManager }),
  );
  return {
    ws,
    client,
    close() {
      sessionManager.abort();
      ws.terminate();
    },
  };
}
