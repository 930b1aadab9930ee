import net from 'node:net';

/**
 * How the proxy treats traffic:
 * - `open`: forwards both ways;
 * - `blackhole`: a network partition as a dropped route looks to both ends while TCP still
 *   retransmits — nothing crosses, nothing is refused, and nothing is lost: the proxy stops
 *   reading both sides (bytes wait in the kernel's buffers, as unacknowledged segments wait at
 *   their sender), and a new connection is accepted and left unanswered. Neither end learns
 *   anything until its own timeout. On `open`, what waited is delivered late and each
 *   connection made during the cut reaches its target: a partition shorter than TCP's
 *   retransmission limit. (A partition longer than that resets connections: `refuse`.)
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

interface Pair {
  client: net.Socket;
  upstream: net.Socket | null;
}

/**
 * A TCP proxy the test controls, in front of one address: what a test puts between a replica
 * and PostgreSQL, or between agents and a replica, to partition them without touching either.
 */
export async function startTcpProxy(target: { host?: string; port: number }): Promise<TcpProxy> {
  let mode: ProxyMode = 'open';
  const pairs = new Set<Pair>();
  const connectUpstream = (pair: Pair) => {
    const upstream = net.connect(target.port, target.host ?? '127.0.0.1');
    pair.upstream = upstream;
    upstream.on('error', () => pair.client.destroy());
    upstream.on('close', () => pair.client.destroy());
    pair.client.pipe(upstream);
    upstream.pipe(pair.client);
  };
  const server = net.createServer((client) => {
    client.on('error', () => undefined);
    if (mode === 'refuse') {
      client.resetAndDestroy();
      return;
    }
    const pair: Pair = { client, upstream: null };
    pairs.add(pair);
    client.on('close', () => {
      pairs.delete(pair);
      pair.upstream?.destroy();
    });
    if (mode === 'blackhole') {
      // accepted, never answered until the route comes back
      client.pause();
      return;
    }
    connectUpstream(pair);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as net.AddressInfo;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    mode: () => mode,
    set(next) {
      mode = next;
      for (const p of pairs) {
        if (next === 'refuse') {
          p.client.resetAndDestroy();
          p.upstream?.resetAndDestroy();
        } else if (next === 'blackhole') {
          // unpipe first: a pipe resumes its source on the destination's 'drain'
          if (p.upstream) {
            p.client.unpipe(p.upstream);
            p.upstream.unpipe(p.client);
            p.upstream.pause();
          }
          p.client.pause();
        } else if (p.upstream === null) {
          connectUpstream(p);
        } else {
          p.client.pipe(p.upstream);
          p.upstream.pipe(p.client);
        }
      }
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
