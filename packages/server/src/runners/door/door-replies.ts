import type { ServerResponse } from 'node:http';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';

/**
 * Every answer of the door, as fixed bytes. A 401 is the same for every cause (unknown, deleted,
 * ssh runner, malformed, throttled), so it says nothing about which runners exist.
 */
export interface DoorReply {
  status: number;
  body: string;
  headers?: Record<string, string>;
}

const json = (status: number, code: string, message: string): DoorReply => ({
  status,
  body: JSON.stringify({ code, message }),
});

export const NOT_FOUND = json(404, 'LF_ROUTE_NOT_FOUND', 'not a door path');
export const UNAUTHORIZED = json(
  401,
  'LF_RUNNER_UNAUTHORIZED',
  'the runner token was not accepted; register the runner again (`leoflow runners register`) and run the printed launch command',
);
export const READY = { status: 200, body: '{"ready":true}' } satisfies DoorReply;
export const NO_BUNDLE = json(404, 'LF_ROUTE_NOT_FOUND', 'this door serves no runner bundle');

export function notPlaced(retryAfterSeconds: number): DoorReply {
  return {
    ...json(503, 'LF_RUNNER_NOT_PLACED', "the runner's tenant is on no cell right now; retry"),
    headers: { 'retry-after': String(retryAfterSeconds) },
  };
}

export function cellUnreachable(retryAfterSeconds: number): DoorReply {
  return {
    ...json(503, 'LF_CELL_UNREACHABLE', "the runner's cell cannot be reached right now; retry"),
    headers: { 'retry-after': String(retryAfterSeconds) },
  };
}

export function cellRefused(retryAfterSeconds: number): DoorReply {
  return {
    ...json(502, 'LF_CELL_REFUSED', "the runner's cell refused the door; retry"),
    headers: { 'retry-after': String(retryAfterSeconds) },
  };
}

function headersOf(r: DoorReply): Record<string, string> {
  return {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(r.body)),
    'cache-control': 'no-store',
    ...r.headers,
  };
}

export function sendReply(res: ServerResponse, r: DoorReply): void {
  res.writeHead(r.status, headersOf(r));
  res.end(r.body);
}

/** The same reply on a socket that asked for an upgrade (no upgrade happens). */
export function sendReplyOnSocket(socket: Duplex, r: DoorReply): void {
  const head = Object.entries({ ...headersOf(r), connection: 'close' })
    .map(([k, v]) => `${k}: ${v}`)
    .join('\r\n');
  socket.end(`HTTP/1.1 ${r.status} ${STATUS_CODES[r.status] ?? ''}\r\n${head}\r\n\r\n${r.body}`);
}
