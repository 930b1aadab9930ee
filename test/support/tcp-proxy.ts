import net from 'node:net';

/**
 * How the proxy treats traffic:
 * - `open`: forwards both ways;
 * - `blackhole`: a network partition as a dropped route looks to both ends — connections stay
 *   open but nothing crosses (bytes are read and discarded), and a new connection is accepted
 *   and never answered; neither end learns anything until its own timeout;
 * - `refuse`: every connection is reset now and new ones are closed at once (a peer whose host
 *   answers with RST: fast, loud failures).
 */
export type ProxyMode = 'open' | 'blackhole' | 'refuse';

export interface TcpProxy {
  port: number;
  /** http://127.0.0.1:<port> */
  url: string;
  mode(): ProxyMode;
  /** cut: blackhole (default) or refuse; heal: open */
  set(mode: ProxyMode): void;
  close(): Promise<void>;
}

/**
 * A TCP proxy the test controls, in front of one address: what a test puts between a replica
 * and PostgreSQL, or between agents and a replica, to partition them without touching either.
 * Healing does not revive a connection that crossed a partition: as after a real one, each end
 * finds out on its own (keepalive, a timeout, a write that fails) and dials again.
 */
export async function startTcpProxy(target: { host?: string; port: number }): Promise<TcpProxy> {
  let mode: ProxyMode = 'open';
  const pairs = new Set<{ client: net.Socket; upstream: net.Socket | null }>();
  const server = net.createServer((client) => {
    client.on('error', () => undefined);
    if (mode === 'refuse') {
      client.resetAndDestroy();
      return;
    }
    const pair = { client, upstream: null as net.Socket | null };
    pairs.add(pair);
    client.on('close', () => {
      pairs.delete(pair);
      pair.upstream?.destroy();
    });
    if (mode === 'blackhole') {
      // accepted, never answered: a connect that "works" and then hears nothing
      client.on('data', () => undefined);
      return;
    }
    const upstream = net.connect(target.port, target.host ?? '127.0.0.1');
    pair.upstream = upstream;
    upstream.on('error', () => client.destroy());
    upstream.on('close', () => client.destroy());
    client.on('data', (b) => {
      if (mode === 'open') upstream.write(b);
    });
    upstream.on('data', (b) => {
      if (mode === 'open') client.write(b);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as net.AddressInfo;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    mode: () => mode,
    set(next) {
      mode = next;
      if (next === 'refuse') {
        for (const p of pairs) {
          p.client.resetAndDestroy();
          p.upstream?.resetAndDestroy();
        }
      }
      // blackhole: open connections stay open and silent (their data handlers drop bytes);
      // open: connections made while blackholed have no upstream and stay dead, as a real
      // connection through a dropped route does once its peer has moved on.
    },
    async close() {
      for (const p of pairs) {
        p.client.destroy();
        p.upstream?.destroy();
      }
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
