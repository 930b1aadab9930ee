import { Duplex } from 'node:stream';

/**
 * What the daemon's HTTP/2 is handed in place of its byte stream to the cell (a door WebSocket,
 * stdin/stdout): the same bytes, except that the cell's EOF closes the stream instead of
 * reaching HTTP/2.
 *
 * Node runs HTTP/2 over a stream that is not a socket through its JS stream socket, which
 * throws an internal assertion (an uncaught exception: the daemon and its tasks end) when the
 * session writes while the socket's shutdown is pending (nodejs/node#35384). An EOF starts that
 * shutdown, since the socket does not stay half-open, while the session may still be writing
 * (a retried report, a window update), and the shutdown stays pending for as long as the
 * stream's own end takes (a WebSocket's close handshake). Closing instead ends the session
 * without a shutdown; the daemon re-dials (door) or ends (stdio) as for any lost session.
 *
 * The cell guards its side the same way (server runners/cells/peer-eof-fence.ts); the daemon may not
 * import the server, hence the two.
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
  // the error (a door's refusal) is the lost session's reason in the daemon's log
  stream.once('error', (err) => fenced.destroy(err));
  stream.once('close', () => fenced.destroy());
  return fenced;
}
