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

export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  return pino(
    { level, redact: { paths: REDACT_PATHS, censor: '[redacted]' }, base: { svc: 'leoflow' } },
    destination ?? process.stderr,
  );
}
