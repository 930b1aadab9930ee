/**
 * The runner daemon (the real process, door transport) while its door is out of reach: a refused
 * connection is an outage it waits out with backoff, not an uncaught exception that ends it (and
 * every daemon that tries to reconnect during a cell restart). The outage is logged once; when
 * the door listens again the daemon dials it and asks for work over HTTP/2 as before.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import http2 from 'node:http2';
import { createServer, type AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createWebSocketStream, WebSocketServer } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { fenceOffPeerEof } from '@leoflow/protocol';

const MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));
const TOKEN = 'reconnect-test-token';

const closers: Array<() => void | Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

/** A port nothing listens on (bound once, then closed). */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

function startDaemon(port: number): { proc: ChildProcess; output: () => string } {
  const work = mkdtempSync(join(tmpdir(), 'leoflow-runner-reconnect-'));
  const proc = spawn(
    process.execPath,
    [MAIN, '--runner', '--url-stdin', '--work-dir', work, '--attempt-uid-range', 'off'],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  proc.stdin.end(`http://127.0.0.1:${port}/runners/${TOKEN}/\n`);
  let out = '';
  proc.stdout.on('data', (b: Buffer) => (out += b.toString()));
  proc.stderr.on('data', (b: Buffer) => (out += b.toString()));
  closers.push(async () => {
    if (proc.exitCode === null && proc.signalCode === null) {
      const gone = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGKILL');
      await gone;
    }
    rmSync(work, { recursive: true, force: true });
  });
  return { proc, output: () => out };
}

async function until(what: string, cond: () => boolean, out: () => string, ms = 15_000) {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; output:\n${out()}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const lostLines = (out: string) => out.split('\n').filter((l) => l.includes('runner session lost'));

describe('the runner daemon when its door refuses connections', () => {
  it('keeps retrying instead of crashing, and logs the outage once', async () => {
    const port = await closedPort();
    const d = startDaemon(port);
    let exited: number | null | undefined;
    d.proc.once('exit', (code) => (exited = code));
    // the first refusal, then at least two more tries (backoff 0.5 s, 1 s, 2 s, … jittered)
    await until('the first refusal', () => lostLines(d.output()).length > 0, d.output);
    await new Promise((r) => setTimeout(r, 2_500));
    expect(exited, d.output()).toBeUndefined();
    expect(d.output()).not.toContain('runner crashed');
    expect(lostLines(d.output())).toHaveLength(1);
    expect(lostLines(d.output())[0]).toContain('ECONNREFUSED');
    expect(lostLines(d.output())[0]).toContain('reconnecting with backoff');
    expect(d.output()).not.toContain(TOKEN);
  }, 30_000);

  it('reconnects once the door listens again and asks it for work', async () => {
    const port = await closedPort();
    const d = startDaemon(port);
    await until('the first refusal', () => lostLines(d.output()).length > 0, d.output);

    // Now a real listener on that port: a WebSocket session at the runner path carrying HTTP/2,
    // as a door in front of a cell does; it records the calls the daemon makes.
    const calls: string[] = [];
    const cell = http2.createServer();
    cell.on('stream', (stream, headers) => {
      calls.push(String(headers[':path']));
      stream.on('error', () => undefined);
      // an AwaitAssignment that stays open, as when there is no work
    });
    const wss = new WebSocketServer({ host: '127.0.0.1', port, path: `/runners/${TOKEN}/session` });
    await new Promise<void>((r) => wss.once('listening', () => r()));
    wss.on('connection', (ws) => {
      const stream = createWebSocketStream(ws);
      stream.on('error', () => ws.terminate());
      cell.emit('connection', fenceOffPeerEof(stream));
    });
    closers.push(
      () =>
        new Promise<void>((r) => {
          for (const c of wss.clients) c.terminate();
          wss.close(() => r());
        }),
    );

    await until(
      'an AwaitAssignment over the new session',
      () => calls.some((p) => p.endsWith('/AwaitAssignment')),
      d.output,
    );
    await until(
      'the daemon to log it is back',
      () => d.output().includes('session back'),
      d.output,
    );
    expect(d.proc.exitCode).toBeNull();
    expect(d.output()).not.toContain('runner crashed');
    expect(lostLines(d.output())).toHaveLength(1);
  }, 30_000);
});
