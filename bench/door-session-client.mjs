// The synthetic client of door_session_memory (its own process, so its memory is not counted):
// opens N runner sessions through the door, each with HTTP/2 on top and an AwaitAssignment
// stream waiting — what an idle runner holds — then prints "ready" and idles until killed.
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport, Http2SessionManager } from '@connectrpc/connect-node';
import { AGENT_PROTOCOL_VERSION, AgentService } from '@leoflow/protocol';
import { createWebSocketStream, WebSocket } from 'ws';

const [url, countText] = process.argv.slice(2);
const count = Number(countText);
const held = [];
let open = 0;
for (let i = 0; i < count; i++) {
  const ws = new WebSocket(url);
  const stream = createWebSocketStream(ws);
  const sessionManager = new Http2SessionManager('http://runner-session', undefined, {
    createConnection: () => stream,
  });
  const client = createClient(
    AgentService,
    createGrpcTransport({ baseUrl: 'http://runner-session', sessionManager }),
  );
  const events = client.awaitAssignment({ freeSlots: 1, protocolVersion: AGENT_PROTOCOL_VERSION });
  const it = events[Symbol.asyncIterator]();
  // The first keepalive or the stream being open is enough; count on 'open'.
  ws.once('open', () => {
    open += 1;
    if (open === count) process.stdout.write('ready\n');
  });
  void it.next().catch(() => undefined);
  held.push({ ws, sessionManager, it });
  // Pace the handshakes a little: each is a secret fetch and an upgrade.
  if (i % 50 === 49) await new Promise((r) => setTimeout(r, 20));
}
setInterval(() => undefined, 60_000);
