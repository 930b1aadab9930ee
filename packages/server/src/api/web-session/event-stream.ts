import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { checkPermission } from '../authz.js';
import { logLineOut } from '../serialize.js';
import { typedApi } from '../typed-routes.js';
import { ChangeFeed, type UiEvent } from './events.js';
import { rememberedAuthentication } from './remembered-auth.js';
import type { UiRouteDeps } from './route-deps.js';

const eventsQuery = {
  type: 'object',
  properties: {
    dag_id: { type: 'string', minLength: 1 },
    run_id: { type: 'string', minLength: 1 },
    task_id: { type: 'string', minLength: 1 },
    try: { type: 'integer', minimum: 1 },
    map_index: { type: 'integer', minimum: -1 },
  },
  additionalProperties: false,
} as const;

/**
 * The web app's live stream (server-sent events): the tenant's changes, and optionally the log of
 * one try as it grows. Closing what it returns stops the change feed.
 */
export function registerEventStream(app: FastifyInstance, d: UiRouteDeps): { close(): void } {
  const api = typedApi(app);
  const interval = d.ui.eventsIntervalMs ?? 1000;
  const feed = new ChangeFeed(d.scopes, interval, d.logger);
  api.get(
    '/api/ui/events',
    {
      schema: {
        summary: 'Web app live stream (server-sent events): changes, and the log of one try',
        querystring: eventsQuery,
      },
    },
    (req, reply) => {
      const q = req.query;
      const follow =
        q.dag_id !== undefined && q.run_id !== undefined && q.task_id !== undefined
          ? {
              dag_id: q.dag_id,
              run_id: q.run_id,
              task_id: q.task_id,
              try: q.try,
              ...(q.map_index !== undefined ? { map_index: q.map_index } : {}),
            }
          : null;
      // Following a log needs what reading it over REST needs.
      if (follow) checkPermission(req.principal, 'logs:read', req.authz);
      streamEvents(req, reply, follow, { feed, interval, logger: d.logger, onlyDag: q.dag_id });
    },
  );
  return { close: () => feed.close() };
}

/** Streams one client's events until it leaves, its credential stops being valid, or a tick fails. */
function streamEvents(
  req: FastifyRequest,
  reply: FastifyReply,
  follow: {
    dag_id: string;
    run_id: string;
    task_id: string;
    try: number | undefined;
    map_index?: number;
  } | null,
  ctx: { feed: ChangeFeed; interval: number; logger: Logger; onlyDag: string | undefined },
): void {
  const { feed, interval, logger, onlyDag } = ctx;
  const auth = rememberedAuthentication(req);
  const scope = req.scope;
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'x-accel-buffering': 'no',
    connection: 'keep-alive',
  });
  let closed = false;
  const send = (event: string, data: unknown) => {
    if (!closed) res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  };
  send('hello', { interval_ms: interval });
  const unsubscribe = feed.subscribe(req.principal.tenant_id, (e: UiEvent) => {
    if (e.type === 'run' && onlyDag !== undefined && e.dag_id !== onlyDag) return;
    send(e.type, e);
  });

  let afterLine = 0;
  let tryNumber = follow?.try;
  let logDone = false;
  let ticks = 0;
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    void (async () => {
      ticks += 1;
      // The credential behind the stream is re-checked: revoking the token or signing out
      // ends the stream within seconds.
      if (ticks % 5 === 0 && auth && !(await auth.stillValid())) {
        send('signed-out', {});
        end();
        return;
      }
      if (follow && !logDone) {
        const out = await scope.readLogs(follow.dag_id, follow.run_id, follow.task_id, {
          ...(tryNumber !== undefined ? { try: tryNumber } : {}),
          ...(follow.map_index !== undefined ? { map_index: follow.map_index } : {}),
          after_line: afterLine,
          limit: 1000,
        });
        tryNumber = out.tryNumber;
        const ti = out.taskInstance;
        const finished =
          out.tryNumber < ti.try_number ||
          !['none', 'scheduled', 'queued', 'running'].includes(ti.state);
        if (out.lines.length > 0) {
          afterLine = out.lines[out.lines.length - 1]?.line_number ?? afterLine;
          send('log', { try_number: out.tryNumber, lines: out.lines.map(logLineOut) });
        } else if (finished) {
          logDone = true;
          send('log-end', { try_number: out.tryNumber });
        }
      }
      if (ticks % 15 === 0) res.write(': keep-alive\n\n');
    })()
      .catch((err: unknown) => {
        logger.warn({ err }, 'live stream tick failed');
        send('stream-error', { message: 'the live stream failed; reload the page' });
        end();
      })
      .finally(() => (busy = false));
  }, interval);
  const end = () => {
    if (closed) return;
    closed = true;
    clearInterval(timer);
    unsubscribe();
    res.end();
  };
  req.raw.on('close', end);
  res.on('close', end);
}
