// The synthetic client of door_session_memory (its own process, so its memory is not counted):
// opens N runner sessions through the door, each with HTTP/2 on top and an AwaitAssignment
// stream waiting — what an idle runner holds — then prints "ready" and idles until killed.
import { AGENT_PROTOCOL_VERSION } from '@leoflow/protocol';
import { runnerSessionClient } from './door-runner.mjs';

const [url, countText] = process.argv.slice(2);
const count = Number(countText);
const held = [];
let open = 0;
for (let i = 0; i < count; i++) {
  const { ws, client, close } = runnerSessionClient(url);
  const events = client.awaitAssignment({ freeSlots: 1, protocolVersion: AGENT_PROTOCOL_VERSION });
  const it = events[Symbol.asyncIterator]();
  // The first keepalive or the stream being open is enough; count on 'open'.
  ws.once('open', () => {
    open += 1;
    if (open === count) process.stdout.write('ready\n');
  });
  void it.next().catch(() => undefined);
  held.push({ close, it });
  // Pace the handshakes a little: each is a secret fetch and an upgrade.
  if (i % 50 === 49) await new Promise((r) => setTimeout(r, 20));
}
setInterval(() => undefined, 60_000);
