import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';

/**
 * Paths pino censors wherever they appear. Secret values must never be logged in the first
 * place; this is the second line of defence for fields named like credentials.
 */
export const REDACT_PATHS = [
  'token',
  '*.token',
  'password',
  '*.password',
  'secret',
  '*.secret',
  'authorization',
  '*.authorization',
  'req.headers.authorization',
  'req.headers.cookie',
  'renewed_token',
  '*.renewed_token',
];

const LEVELS: Record<number, string> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO',
  40: 'WARN',
  50: 'ERROR',
  60: 'FATAL',
};
const OMIT = new Set(['level', 'time', 'msg', 'svc', 'pid', 'hostname']);

/** One readable line per record for a person at a terminal; scripts and files get JSON. */
export function humanLogStream(out: NodeJS.WritableStream): Writable {
  return new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line) continue;
        try {
          const rec = JSON.parse(line) as Record<string, unknown>;
          const time = new Date(Number(rec.time)).toISOString().slice(11, 19);
          const extra = Object.entries(rec)
            .filter(([k]) => !OMIT.has(k))
            .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
            .join(' ');
          const level = LEVELS[Number(rec.level)] ?? 'INFO';
          out.write(
            `${time} ${level.padEnd(5)} ${typeof rec.msg === 'string' ? rec.msg : ''}${extra ? `  ${extra}` : ''}\n`,
          );
        } catch {
          out.write(`${line}\n`);
        }
      }
      done();
    },
  });
}

/** Where a process's log goes: readable lines on a terminal, one JSON record a line otherwise. */
export function logDestination(
  out: NodeJS.WritableStream & { isTTY?: boolean },
): NodeJS.WritableStream {
  return out.isTTY ? humanLogStream(out) : out;
}

export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  const dest = destination ?? logDestination(process.stderr);
  return pino(
    { level, redact: { paths: REDACT_PATHS, censor: '[redacted]' }, base: { svc: 'leoflow' } },
    dest,
  );
}
