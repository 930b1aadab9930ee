import { createHash, randomBytes } from 'node:crypto';
import { LeoflowError, VaultError } from '@leoflow/core';

export const SECRET_KEY_BYTES = 32;

const ACCEPTED =
  '32 raw bytes, 64 hex characters, or the base64 / base64url encoding of exactly 32 bytes ' +
  '(generate one with `openssl rand -base64 32`)';

const HEX_64 = /^[0-9a-fA-F]{64}$/;
// 32 bytes are 43 base64 characters plus one optional '=' of padding.
const BASE64_32 = /^[A-Za-z0-9+/]{43}=?$/;
const BASE64URL_32 = /^[A-Za-z0-9_-]{43}=?$/;

/**
 * Decodes an AES-256 key. `setting` names where the value came from (an env variable, a
 * keyring file entry) so the error can say what to fix; the value itself is never echoed,
 * not even in part.
 */
export function parseSecretKey(input: string | Buffer, setting: string): Buffer {
  if (Buffer.isBuffer(input)) {
    if (input.length === SECRET_KEY_BYTES) return Buffer.from(input);
    // Any other length can only be text (a file holding hex or base64). Raw is ruled out
    // here: lossy UTF-8 decoding could otherwise turn e.g. 30 bytes into 32.
    const parsed = parseEncoded(input.toString('utf8'));
    if (parsed !== undefined) return parsed;
    throw invalidKey(setting, input.length);
  }
  if (Buffer.byteLength(input, 'utf8') === SECRET_KEY_BYTES) return Buffer.from(input, 'utf8');
  const parsed = parseEncoded(input);
  if (parsed !== undefined) return parsed;
  throw invalidKey(setting, Buffer.byteLength(input, 'utf8'));
}

function parseEncoded(input: string): Buffer | undefined {
  // A trailing newline from `echo ... > file` or a Secret created from a file is a common
  // accident with the encoded forms; raw keys are taken byte-for-byte.
  const text = input.trim();
  if (HEX_64.test(text)) return Buffer.from(text, 'hex');
  return decodeBase64Key(text);
}

function invalidKey(setting: string, length: number): LeoflowError {
  return new VaultError(
    'LF_SECRET_KEY_INVALID',
    `${setting} is not a valid secret key (the value is ${length} bytes long); expected ${ACCEPTED}.`,
    { setting },
  );
}

function decodeBase64Key(text: string): Buffer | undefined {
  const std = BASE64_32.test(text);
  const url = BASE64URL_32.test(text);
  if (!std && !url) return undefined;
  const body = text.endsWith('=') ? text.slice(0, -1) : text;
  const bytes = Buffer.from(body, std ? 'base64' : 'base64url');
  // Node's decoder is lenient about trailing bits; only the canonical spelling of exactly
  // 32 bytes counts, so two different strings never name the same key.
  const canonical = bytes.toString(std ? 'base64' : 'base64url').replace(/=+$/, '');
  if (bytes.length !== SECRET_KEY_BYTES || canonical !== body) return undefined;
  return bytes;
}

/** The encoding Leoflow writes (keyring files): standard base64 with padding. */
export function encodeSecretKey(key: Buffer): string {
  return key.toString('base64');
}

export function generateSecretKey(): Buffer {
  return randomBytes(SECRET_KEY_BYTES);
}

/**
 * A stable id for a key: `k-` and the first 8 hex digits of its SHA-256. The same key gets
 * the same id whether it comes from the environment or a keyring file, so moving a key
 * between the two never strands a ciphertext. 32 bits of a hash of a random 256-bit key
 * reveal nothing usable about it.
 */
export function secretKeyId(key: Buffer): string {
  return `k-${createHash('sha256').update(key).digest('hex').slice(0, 8)}`;
}
