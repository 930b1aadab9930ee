import {
  createCipheriv,
  createDecipheriv,
  createSecretKey,
  randomBytes,
  type KeyObject,
} from 'node:crypto';
import { inspect } from 'node:util';
import { LeoflowError, VaultError } from '@leoflow/core';
import type { SealedKind } from '../store/vault-types.js';
import { SECRET_KEY_BYTES } from './secret-key.js';

export interface KeyringEntry {
  id: string;
  key: Buffer;
}

export interface Sealed {
  cipher: Uint8Array;
  key_id: string;
}

/** Envelope layout version; bump it (and keep opening the old one) if the layout changes. */
const ENVELOPE_V1 = 0x01;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const HEADER_BYTES = 1;
const MIN_ENVELOPE = HEADER_BYTES + NONCE_BYTES + TAG_BYTES;

const KEY_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/;

/** What a ciphertext can be bound to: every kind key rotation re-encrypts. */
export type VaultAadKind = SealedKind;

/**
 * The additional authenticated data that binds a ciphertext to its row: a value copied into
 * another row (another tenant, another name, a variable into a connection) fails to open.
 */
export function vaultAad(kind: VaultAadKind, tenant_id: string, id: string): string {
  // NUL separates the parts, so a NUL inside one would let two different rows share an AAD.
  if (tenant_id.includes('\0') || id.includes('\0')) {
    throw new LeoflowError('LF_INVALID_ARGUMENT', 'tenant ids and vault names cannot contain NUL.');
  }
  return `${kind}\u0000${tenant_id}\u0000${id}`;
}

export function isValidKeyId(id: string): boolean {
  return KEY_ID.test(id);
}

/**
 * AES-256-GCM under a set of keys with ids. New values are always sealed with the current
 * key; older keys stay only so that values sealed before a rotation still open. The envelope
 * is version ‖ nonce ‖ ciphertext ‖ tag; the version byte is authenticated with the AAD.
 *
 * Key bytes live in private fields only, so neither JSON.stringify nor util.inspect (and so no
 * logger) can print them.
 */
export class Keyring {
  readonly currentKeyId: string;
  readonly #keys = new Map<string, KeyObject>();

  constructor(current: KeyringEntry, older: readonly KeyringEntry[] = []) {
    for (const entry of [current, ...older]) {
      if (!isValidKeyId(entry.id)) {
        throw new VaultError(
          'LF_SECRET_KEYRING_INVALID',
          `key id ${JSON.stringify(entry.id)} is not valid: use 1-64 letters, digits, '.', '_', ':' or '-'.`,
        );
      }
      if (entry.key.length !== SECRET_KEY_BYTES) {
        throw new VaultError(
          'LF_SECRET_KEY_INVALID',
          `key ${entry.id} is ${entry.key.length} bytes; AES-256 needs exactly ${SECRET_KEY_BYTES}.`,
        );
      }
      const existing = this.#keys.get(entry.id);
      if (existing !== undefined) {
        // The same key listed twice (env and keyring file, say) is harmless; two different
        // keys under one id would make every ciphertext ambiguous.
        if (existing.equals(createSecretKey(entry.key))) continue;
        throw new VaultError(
          'LF_SECRET_KEYRING_INVALID',
          `key id ${entry.id} names two different keys; give each key its own id.`,
        );
      }
      this.#keys.set(entry.id, createSecretKey(Buffer.from(entry.key)));
    }
    this.currentKeyId = current.id;
  }

  /** The current key id first, then the older ones. */
  keyIds(): string[] {
    return [...this.#keys.keys()];
  }

  has(key_id: string): boolean {
    return this.#keys.has(key_id);
  }

  seal(plaintext: Uint8Array, aad: string): Sealed {
    const key = this.#keys.get(this.currentKeyId);
    if (key === undefined) throw new Error('keyring lost its current key');
    const header = Buffer.of(ENVELOPE_V1);
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
    cipher.setAAD(additionalData(ENVELOPE_V1, aad));
    const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
    const envelope = Buffer.concat([header, nonce, body, cipher.getAuthTag()]);
    return {
      cipher: new Uint8Array(envelope.buffer, envelope.byteOffset, envelope.byteLength),
      key_id: this.currentKeyId,
    };
  }

  open(envelope: Uint8Array, key_id: string, aad: string): Uint8Array {
    const key = this.#keys.get(key_id);
    if (key === undefined) {
      throw new VaultError(
        'LF_SECRET_KEY_MISSING',
        `a stored secret is sealed with key id ${key_id}, which is not in the keyring ` +
          `(loaded: ${this.keyIds().join(', ')}); add that key back as an older key ` +
          '(keyring file, or LEOFLOW_SECRET_KEY_PREVIOUS) and restart.',
        { key_id },
      );
    }
    const bytes = Buffer.from(envelope.buffer, envelope.byteOffset, envelope.byteLength);
    if (bytes.length < MIN_ENVELOPE || bytes[0] !== ENVELOPE_V1) throw decryptFailed(key_id);
    const nonce = bytes.subarray(HEADER_BYTES, HEADER_BYTES + NONCE_BYTES);
    const body = bytes.subarray(HEADER_BYTES + NONCE_BYTES, bytes.length - TAG_BYTES);
    const tag = bytes.subarray(bytes.length - TAG_BYTES);
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
      decipher.setAAD(additionalData(ENVELOPE_V1, aad));
      decipher.setAuthTag(tag);
      const plain = decipher.update(body);
      // GCM is a stream mode: update() returns the whole plaintext and final() only checks the
      // tag (it returns nothing). Without the concat copy the caller's fill(0) wipes the only
      // plaintext buffer there is.
      const rest = decipher.final();
      const out = rest.length === 0 ? plain : Buffer.concat([plain, rest]);
      return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
    } catch {
      // The cause is deliberately dropped: it adds nothing and must never grow to carry data.
      throw decryptFailed(key_id);
    }
  }

  toJSON(): { current: string; key_ids: string[] } {
    return { current: this.currentKeyId, key_ids: this.keyIds() };
  }

  toString(): string {
    return `Keyring { current: ${this.currentKeyId}, key_ids: [${this.keyIds().join(', ')}] }`;
  }

  [inspect.custom](): string {
    return this.toString();
  }
}

/** The envelope's version byte followed by the row's AAD (UTF-8), in one allocation. */
function additionalData(version: number, aad: string): Buffer {
  const out = Buffer.allocUnsafe(HEADER_BYTES + Buffer.byteLength(aad, 'utf8'));
  out[0] = version;
  out.write(aad, HEADER_BYTES, 'utf8');
  return out;
}

function decryptFailed(key_id: string): LeoflowError {
  return new VaultError(
    'LF_SECRET_DECRYPT_FAILED',
    `a stored secret sealed with key id ${key_id} failed to decrypt: it was altered, copied ` +
      'from another row, or the key loaded under that id is a different key. Set the value again.',
    { key_id },
  );
}
