import type { FastifyRequest } from 'fastify';

const live = new WeakMap<
  FastifyRequest,
  { session: string | null; stillValid: () => Promise<boolean> }
>();

/** Remembers how a request authenticated (the stream re-checks it; sign-out needs the session). */
export function rememberAuthentication(
  req: FastifyRequest,
  a: { session: string | null; stillValid: () => Promise<boolean> },
): void {
  live.set(req, a);
}

/** How a request authenticated, if rememberAuthentication saw it. */
export function rememberedAuthentication(
  req: FastifyRequest,
): { session: string | null; stillValid: () => Promise<boolean> } | undefined {
  return live.get(req);
}
