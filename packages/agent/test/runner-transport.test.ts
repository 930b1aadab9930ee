/**
 * The daemon's side of a runner session when the cell stops sending (EOF) while the daemon's own
 * end of the stream is slow to finish (a WebSocket's close handshake, a stdout pipe nobody
 * drains). Node's HTTP/2 over a non-socket stream asserts, an uncaught exception that would end
 * the daemon and its tasks, if the session writes while that end is pending; the transports
 * therefore close on EOF instead (runner/peer-eof-fence.ts), and the session ends like any lost
 * one: the next call fails and the daemon re-dials or, on stdio, ends.
 */
import http2 from 'node:http2';
import { Duplex, PassThrough, Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { stdioTransport } from '../src/runner/transport.js';

const closers: Array<() => void> = [];
afterEach(() => {
  for (const c of closers.splice(0)) c();
});

async function until(what: string, cond: () => boolean, ms = 3_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('a runner transport whose cell sends EOF', () => {
  it('ends the HTTP/2 session at once; a call after it fails instead of writing', async () => {
    const daemonToCell = new PassThrough();
    const cellToDaemon = new PassThrough();
    let eofSent = false;
    let bytesAfterEof = 0;
    const daemonWrites = new Writable({
      write(chunk: Buffer, _enc, done) {
        if (eofSent) bytesAfterEof += chunk.length;
        daemonToCell.write(chunk, done);
      },
      // the daemon's own end never completes here: a shutdown would stay pending
      final() {},
    });
    const cell = http2.createServer((_req, res) => res.end('ok'));
    cell.emit('connection', Duplex.from({ readable: daemonToCell, writable: cellToDaemon }));

    const session = http2.connect('http://runner-session', {
      createConnection: () => stdioTransport(cellToDaemon, daemonWrites).connect(),
    });
    session.on('error', () => undefined);
    closers.push(() => session.destroy());
    const first = session.request({ ':path': '/' });
    first.resume();
    await new Promise<void>((r, j) => first.on('end', r).on('error', j));

    eofSent = true;
    cellToDaemon.end();
    await until('the session to end', () => session.destroyed);

    const late = await new Promise<string>((resolve) => {
      try {
        const req = session.request({ ':path': '/' });
        req.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
        req.on('response', () => resolve('answered'));
      } catch (err) {
        resolve((err as NodeJS.ErrnoException).code ?? 'threw');
      }
    });
    expect(late).toBe('ERR_HTTP2_INVALID_SESSION');
    expect(bytesAfterEof).toBe(0);
  });
});
