import Fastify from 'fastify';
import type { Logger } from 'pino';
import { registerProbeRoutes } from './probe-routes.js';
import type { Readiness } from './readiness.js';

/**
 * A `scheduler` replica serves no REST API, but Kubernetes still probes it on the HTTP port:
 * this listener has the two probe routes and nothing else (every other path is 404).
 */
export async function startProbeServer(opts: {
  host: string;
  port: number;
  readiness: () => Promise<Readiness>;
  logger: Logger;
}): Promise<{ port: number; close(): Promise<void> }> {
  const app = Fastify({ loggerInstance: opts.logger.child({ component: 'probes' }) });
  void app.register((probes, _o, done) => {
    registerProbeRoutes(probes, opts.readiness);
    done();
  });
  await app.listen({ host: opts.host, port: opts.port });
  const addr = app.server.address();
  return {
    port: typeof addr === 'object' && addr ? addr.port : opts.port,
    close: () => app.close(),
  };
}
