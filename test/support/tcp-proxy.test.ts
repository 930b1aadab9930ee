import net from 'node:net';
import { expect, it } from 'vitest';
import { startTcpProxy } from './tcp-proxy.js';
// The proxy the fault cases partition with (tcp-proxy.ts): a cut delays bytes and connections,
// a heal delivers both late (TCP within its retransmission limit), refuse resets.
it('blackhole holds bytes and new connections, open delivers them late, refuse resets', async () => {
  const echo = net.createServer((s) => {
    s.on('error', () => undefined);
    s.pipe(s);
  });
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', () => r()));
  const p = await startTcpProxy({ port: (echo.address() as net.AddressInfo).port });
  const c = net.connect(p.port, '127.0.0.1');
  c.on('error', () => undefined);
  let got = '';
  c.on('data', (b) => (got += b.toString()));
  c.write('a');
  await new Promise((r) => setTimeout(r, 200));
  expect(got).toBe('a');
  p.set('blackhole');
  c.write('b');
  const c2 = net.connect(p.port, '127.0.0.1');
  c2.on('error', () => undefined);
  let got2 = '';
  c2.on('data', (b) => (got2 += b.toString()));
  c2.write('x');
  await new Promise((r) => setTimeout(r, 300));
  expect(got).toBe('a');
  expect(got2).toBe('');
  p.set('open');
  await new Promise((r) => setTimeout(r, 300));
  expect(got).toBe('ab');
  expect(got2).toBe('x');
  p.set('refuse');
  await new Promise((r) => setTimeout(r, 100));
  expect(c.destroyed || c.readyState !== 'open').toBe(true);
  await p.close();
  echo.close();
});
