import { Duplex } from 'node:stream';

/**
 * What Node's HTTP/2 is handed in place of a runner session's own byte stream (a door
 * WebSocket, an ssh channel): the same bytes, except that the peer's EOF closes the stream
 * instead of reaching HTTP/2.
 *
 * Why: Node runs HTTP/2 over a stream that is not a socket through its JS stream socket, which
 * throws an internal assertion (an uncaught exception: the whole cell process ends) when the
 * session writes while the socket's shutdown is pending (nodejs/node#35384). A peer's EOF starts
 * that shutdown, since the socket does not stay half-open, while the session may still owe the
 * peer frames (an answer being computed, an assignment); and the shutdown stays pending for as
 * long as the stream's own end takes: a WebSocket's close handshake, or for good when its write
 * side is already gone. Closing instead destroys the session without a shutdown. A peer that
 * sent EOF has sent its last request; what the session still owed it is dropped, as a socket
 * that is not half-open drops it.
 */
export function fenceOffPeerEof(stream: Duplex): Duplex {
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
  stream.once('error', () => fenced.destroy());
  stream.once('close', () => fenced.destroy());
  return fenced;
}
