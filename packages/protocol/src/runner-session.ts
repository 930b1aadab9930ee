import { Duplex } from 'node:stream';

/**
 * What the agent side and the control plane agree on outside the .proto: the header that carries
 * an agent's session key, a runner session's close codes and frame limit, and the peer-EOF fence
 * both ends of a runner session put under HTTP/2. One definition, imported by the agent (which
 * never imports the server) and by the server.
 */

/** The header an agent's calls carry its session key in (bound at Register). */
export const SESSION_HEADER = 'leoflow-session';

/** WebSocket close codes of a runner session (application range 4000-4999). */
export const SESSION_CLOSE = {
  /** the runner was deleted: its token no longer resolves; do not reconnect with it */
  runnerDeleted: { code: 4401, reason: 'runner deleted' },
  /** the tenant is placed on another cell now: reconnect, and the door sends the runner there */
  tenantMoved: { code: 4302, reason: 'tenant placed on another cell; reconnect' },
  /** the door or the cell is going away; reconnect */
  shuttingDown: { code: 1001, reason: 'going away' },
  /** the cell accepted the session before it serves runners; reconnect */
  starting: { code: 1013, reason: 'the cell is starting; reconnect' },
} as const;

/** A cell's internal endpoint for doors: where a door asks for a per-connection secret. */
export const SECRET_PATH = '/internal/v1/door/connection-secrets';

/** ... and where it upgrades a runner's session to the cell. */
export const SESSION_PATH = '/internal/v1/runner-session';

/** The upstream handshake header the door puts the per-connection secret in. */
export const CONNECTION_SECRET_HEADER = 'leoflow-connection-secret';

/** The largest WebSocket frame of a runner session, at the door and the cell alike. */
export const MAX_SESSION_FRAME_BYTES = 16 * 1024 * 1024;

/**
 * What Node's HTTP/2 is handed in place of a runner session's own byte stream (a door
 * WebSocket, an ssh channel, stdin/stdout): the same bytes, except that the peer's EOF closes
 * the stream instead of reaching HTTP/2.
 *
 * Why: Node runs HTTP/2 over a stream that is not a socket through its JS stream socket, which
 * throws an internal assertion (an uncaught exception: the whole process ends) when the session
 * writes while the socket's shutdown is pending (nodejs/node#35384). A peer's EOF starts that
 * shutdown, since the socket does not stay half-open, while the session may still owe the peer
 * frames; and the shutdown stays pending for as long as the stream's own end takes (a
 * WebSocket's close handshake, or for good when its write side is already gone). Closing instead
 * destroys the session without a shutdown. A peer that sent EOF has sent its last request; what
 * the session still owed it is dropped, as a socket that is not half-open drops it.
 *
 * The stream's own error (a refused connection, a reset) closes the fenced stream too, without
 * the error: an error event would reach HTTP/2's socket wrapper, and the session re-emits it
 * after its client may have stopped listening (an uncaught exception again). `onError` is told
 * instead (the runner daemon logs it as the lost session's reason).
 */
export function fenceOffPeerEof(
  stream: Duplex,
  opts: { onError?: (err: Error) => void } = {},
): Duplex {
  const fenced = new Duplex({
    read() {
      stream.resume();
    },
    write(chunk: Buffer, _encoding, done) {
      stream.write(chunk, done);
    },
    // HTTP/2 ends its own side only once the session is closed: nothing is written after it.
    final(done) {
      stream.end(done);
    },
    destroy(err, done) {
      stream.destroy();
      done(err);
    },
  });
  stream.on('data', (chunk: Buffer) => {
    if (!fenced.push(chunk)) stream.pause();
  });
  stream.once('end', () => fenced.destroy());
  stream.once('error', (err) => {
    opts.onError?.(err);
    fenced.destroy();
  });
  stream.once('close', () => fenced.destroy());
  return fenced;
}
