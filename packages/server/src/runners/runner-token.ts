import { createHash, randomBytes } from 'node:crypto';

/** Leak scanners look for this prefix; a runner token is a password, not an id. */
export const RUNNER_TOKEN_PREFIX = 'lfr_';
/** 256 bits from the CSPRNG, base64url without padding: 43 characters after the prefix. */
export const RUNNER_TOKEN_BYTES = 32;
const TOKEN_SHAPE = /^lfr_[A-Za-z0-9_-]{43}$/;

/** A fresh inbound runner token: minted once, at registration, never replaced. */
export function mintRunnerToken(): string {
  return RUNNER_TOKEN_PREFIX + randomBytes(RUNNER_TOKEN_BYTES).toString('base64url');
}

/**
 * What the directory stores and the door looks up: SHA-256 (hex) of the whole token. Lookup by
 * hash means nothing is ever compared byte by byte against a stored token.
 */
export function runnerTokenHash(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/** Whether a string has the shape of a runner token (no lookup; the door still hashes it). */
export function isRunnerTokenShape(s: string): boolean {
  return TOKEN_SHAPE.test(s);
}

/** A token-shaped run: the prefix and enough of the base64url body to be one (or a piece of one). */
const TOKEN_LIKE = /lfr_[A-Za-z0-9_-]{8,}/i;

function decoded(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/**
 * Every logged or displayed form of a door path, with the token gone wherever it stands: the
 * segment after any `runners` segment, and any token-shaped segment anywhere (also
 * percent-encoded, in the query or after `..` or `//`), so `//runners/<token>/login` and
 * `/runners/x/../<token>/login` log no token (issue 33).
 */
export function redactRunnerPath(path: string): string {
  const parts = path.split(/([/?#&=;])/);
  let previous = '';
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i]!;
    if (p === '' || /^[/?#&=;]$/.test(p)) continue;
    const d = decoded(p);
    if (previous.toLowerCase() === 'runners' || TOKEN_LIKE.test(d)) parts[i] = '<redacted>';
    previous = d;
  }
  return parts.join('');
}
