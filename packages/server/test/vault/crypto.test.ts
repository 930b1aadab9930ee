import { randomBytes } from 'node:crypto';
import { inspect } from 'node:util';
import { isLeoflowError, LeoflowError } from '@leoflow/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Keyring, vaultAad } from '../../src/vault/keyring.js';
import {
  encodeSecretKey,
  generateSecretKey,
  parseSecretKey,
  secretKeyId,
} from '../../src/vault/secret-key.js';

const SETTING = 'LEOFLOW_SECRET_KEY';

function entry(key = generateSecretKey()) {
  return { id: secretKeyId(key), key };
}

function caught(fn: () => unknown): LeoflowError {
  try {
    fn();
  } catch (err) {
    if (isLeoflowError(err)) return err;
    throw err;
  }
  throw new Error('expected a LeoflowError');
}

/** Every spelling of a key that must never appear in an error. */
function keyForms(key: Buffer): string[] {
  return [
    key.toString('hex'),
    key.toString('base64'),
    key.toString('base64url'),
    key.toString('latin1'),
    key.toString('hex').slice(0, 16),
    key.toString('base64').slice(0, 12),
  ];
}

describe('T101: AES-256-GCM sealing', () => {
  const aad = vaultAad('variable', 'tenant-1', 'api_key');

  it('two seals of the same plaintext differ (fresh nonce) and both open to the original', () => {
    const ring = new Keyring(entry());
    const plain = Buffer.from('s3cr3t value ünïcode');
    const a = ring.seal(plain, aad);
    const b = ring.seal(plain, aad);
    expect(Buffer.from(a.cipher).equals(Buffer.from(b.cipher))).toBe(false);
    // Nonces differ, not just the bodies.
    expect(
      Buffer.from(a.cipher.subarray(1, 13)).equals(Buffer.from(b.cipher.subarray(1, 13))),
    ).toBe(false);
    expect(a.key_id).toBe(ring.currentKeyId);
    expect(Buffer.from(ring.open(a.cipher, a.key_id, aad)).toString()).toBe('s3cr3t value ünïcode');
    expect(Buffer.from(ring.open(b.cipher, b.key_id, aad)).equals(plain)).toBe(true);
  });

  it('envelope is version ‖ 12-byte nonce ‖ ciphertext ‖ 16-byte tag', () => {
    const ring = new Keyring(entry());
    const sealed = ring.seal(new Uint8Array(5), aad);
    expect(sealed.cipher.length).toBe(1 + 12 + 5 + 16);
    expect(sealed.cipher[0]).toBe(1);
    expect(ring.seal(new Uint8Array(0), aad).cipher.length).toBe(29);
    expect(ring.open(ring.seal(new Uint8Array(0), aad).cipher, ring.currentKeyId, aad)).toEqual(
      new Uint8Array(0),
    );
  });

  it('flipping any single byte of the envelope fails to open', () => {
    const ring = new Keyring(entry());
    const { cipher, key_id } = ring.seal(Buffer.from('attack at dawn'), aad);
    for (let i = 0; i < cipher.length; i++) {
      const bad = Uint8Array.from(cipher);
      bad[i] = (bad[i] ?? 0) ^ 0x01;
      const err = caught(() => ring.open(bad, key_id, aad));
      expect(err.code).toBe('LF_SECRET_DECRYPT_FAILED');
    }
    expect(caught(() => ring.open(cipher.subarray(0, 28), key_id, aad)).code).toBe(
      'LF_SECRET_DECRYPT_FAILED',
    );
    expect(caught(() => ring.open(new Uint8Array(0), key_id, aad)).code).toBe(
      'LF_SECRET_DECRYPT_FAILED',
    );
  });

  it('property: round trip for any plaintext, and never equal ciphertexts', () => {
    const ring = new Keyring(entry(), [entry()]);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 2048 }), fc.string(), (bytes, id) => {
        const rowAad = vaultAad('connection', 't', id.replace(/\0/g, ''));
        const one = ring.seal(bytes, rowAad);
        const two = ring.seal(bytes, rowAad);
        expect(Buffer.from(one.cipher).equals(Buffer.from(two.cipher))).toBe(false);
        expect(
          Buffer.from(ring.open(one.cipher, one.key_id, rowAad)).equals(Buffer.from(bytes)),
        ).toBe(true);
      }),
      { numRuns: 200 },
    );
  });

  it('a key of 31 bytes is rejected, and so are 33 bytes', () => {
    expect(caught(() => parseSecretKey(randomBytes(31), SETTING)).code).toBe(
      'LF_SECRET_KEY_INVALID',
    );
    expect(caught(() => parseSecretKey(randomBytes(33), SETTING)).code).toBe(
      'LF_SECRET_KEY_INVALID',
    );
    expect(caught(() => parseSecretKey('a'.repeat(31), SETTING)).code).toBe(
      'LF_SECRET_KEY_INVALID',
    );
    expect(caught(() => parseSecretKey('a'.repeat(33), SETTING)).code).toBe(
      'LF_SECRET_KEY_INVALID',
    );
    // Encoded forms of the wrong length.
    expect(caught(() => parseSecretKey(randomBytes(31).toString('hex'), SETTING)).code).toBe(
      'LF_SECRET_KEY_INVALID',
    );
    expect(caught(() => parseSecretKey(randomBytes(33).toString('hex'), SETTING)).code).toBe(
      'LF_SECRET_KEY_INVALID',
    );
    expect(caught(() => parseSecretKey(randomBytes(31).toString('base64'), SETTING)).code).toBe(
      'LF_SECRET_KEY_INVALID',
    );
    expect(caught(() => parseSecretKey(randomBytes(33).toString('base64'), SETTING)).code).toBe(
      'LF_SECRET_KEY_INVALID',
    );
    expect(caught(() => new Keyring({ id: 'k-1', key: randomBytes(31) })).code).toBe(
      'LF_SECRET_KEY_INVALID',
    );
  });

  it('accepts 32 raw bytes, 64 hex, base64 (padded or not) and base64url of 32 bytes', () => {
    const key = randomBytes(32);
    expect(parseSecretKey(Buffer.from(key), SETTING).equals(key)).toBe(true);
    expect(parseSecretKey(key.toString('hex'), SETTING).equals(key)).toBe(true);
    expect(parseSecretKey(key.toString('hex').toUpperCase(), SETTING).equals(key)).toBe(true);
    expect(parseSecretKey(key.toString('base64'), SETTING).equals(key)).toBe(true);
    expect(parseSecretKey(key.toString('base64').replace(/=+$/, ''), SETTING).equals(key)).toBe(
      true,
    );
    expect(parseSecretKey(key.toString('base64url'), SETTING).equals(key)).toBe(true);
    expect(parseSecretKey(`${key.toString('base64url')}=`, SETTING).equals(key)).toBe(true);
    // A 32-character text key is taken byte for byte.
    const text = 'abcdefghijklmnopqrstuvwxyz012345';
    expect(parseSecretKey(text, SETTING).equals(Buffer.from(text))).toBe(true);
    // A trailing newline on an encoded key (echo > file) is forgiven.
    expect(parseSecretKey(`${key.toString('hex')}\n`, SETTING).equals(key)).toBe(true);
    expect(parseSecretKey(Buffer.from(`${key.toString('base64')}\n`), SETTING).equals(key)).toBe(
      true,
    );
    expect(parseSecretKey(encodeSecretKey(key), SETTING).equals(key)).toBe(true);
  });

  it('base64 keys with the base64url alphabet must be canonical and unmixed', () => {
    // Key bytes chosen so that both '+'/'/' and '-'/'_' spellings exist.
    const key = Buffer.alloc(32, 0xfb);
    const std = key.toString('base64');
    const url = key.toString('base64url');
    expect(std).toMatch(/[+/]/);
    expect(parseSecretKey(url, SETTING).equals(key)).toBe(true);
    const mixed = `${url.slice(0, 10)}${std.slice(10, 43)}`;
    expect(caught(() => parseSecretKey(mixed, SETTING)).code).toBe('LF_SECRET_KEY_INVALID');
    // Non-zero trailing bits: decodes to 32 bytes in Node, but is not a canonical encoding.
    // '9' is 0b111101: its two low bits would be padding, and they are not zero.
    const nonCanonical = `${std.slice(0, 42)}9`;
    expect(caught(() => parseSecretKey(nonCanonical, SETTING)).code).toBe('LF_SECRET_KEY_INVALID');
  });

  it('a lossy UTF-8 buffer cannot sneak in as a 32-byte raw key', () => {
    // 29 ASCII bytes + one invalid byte decode to 29 + 3 = 32 UTF-8 bytes.
    const buf = Buffer.concat([Buffer.from('a'.repeat(29)), Buffer.from([0xff])]);
    expect(caught(() => parseSecretKey(buf, SETTING)).code).toBe('LF_SECRET_KEY_INVALID');
  });

  it('error messages name the setting and the accepted encodings and never contain the key', () => {
    const near = randomBytes(31);
    const candidates: [string | Buffer, Buffer][] = [
      [near, near],
      [near.toString('hex'), near],
      [near.toString('base64'), near],
      [`${near.toString('hex')}zz`, near],
      [Buffer.concat([near, randomBytes(2)]), near],
    ];
    for (const [input, raw] of candidates) {
      const err = caught(() => parseSecretKey(input, SETTING));
      expect(err.code).toBe('LF_SECRET_KEY_INVALID');
      expect(err.message).toContain(SETTING);
      expect(err.message).toMatch(/32 raw bytes/);
      expect(err.message).toMatch(/64 hex/);
      expect(err.message).toMatch(/base64url/);
      const text = typeof input === 'string' ? input : input.toString('latin1');
      expect(err.message).not.toContain(text);
      for (const form of keyForms(raw)) expect(err.message).not.toContain(form);
      expect(JSON.stringify(err.details)).not.toContain(text);
    }
    const empty = caught(() => parseSecretKey('', 'LEOFLOW_SECRET_KEY_PREVIOUS (entry 2)'));
    expect(empty.message).toContain('LEOFLOW_SECRET_KEY_PREVIOUS (entry 2)');
  });

  it('key ids are k-<8 hex of sha256>, stable for the same key', () => {
    const key = randomBytes(32);
    expect(secretKeyId(key)).toMatch(/^k-[0-9a-f]{8}$/);
    expect(secretKeyId(Buffer.from(key))).toBe(secretKeyId(key));
    expect(secretKeyId(randomBytes(32))).not.toBe(secretKeyId(key));
  });
});

describe('keyring', () => {
  it('binds a ciphertext to its row: another row, tenant or kind cannot open it', () => {
    const ring = new Keyring(entry());
    const sealed = ring.seal(Buffer.from('pw'), vaultAad('connection', 't1', 'warehouse'));
    for (const wrong of [
      vaultAad('connection', 't1', 'warehouse2'),
      vaultAad('connection', 't2', 'warehouse'),
      vaultAad('variable', 't1', 'warehouse'),
    ]) {
      expect(caught(() => ring.open(sealed.cipher, sealed.key_id, wrong)).code).toBe(
        'LF_SECRET_DECRYPT_FAILED',
      );
    }
    expect(() => vaultAad('variable', 't\0x', 'k')).toThrow(/NUL/);
    expect(() => vaultAad('variable', 't', 'k\0')).toThrow(/NUL/);
  });

  it('seals with the current key and opens values sealed by any key it holds', () => {
    const k1 = entry();
    const k2 = entry();
    const aad = vaultAad('variable', 't', 'k');
    const old = new Keyring(k1).seal(Buffer.from('old'), aad);
    const ring = new Keyring(k2, [k1]);
    expect(ring.currentKeyId).toBe(k2.id);
    expect(ring.keyIds()).toEqual([k2.id, k1.id]);
    expect(ring.seal(Buffer.from('x'), aad).key_id).toBe(k2.id);
    expect(Buffer.from(ring.open(old.cipher, k1.id, aad)).toString()).toBe('old');
    // The key id recorded with the value matters: the same bytes under another key fail.
    expect(caught(() => ring.open(old.cipher, k2.id, aad)).code).toBe('LF_SECRET_DECRYPT_FAILED');
  });

  it('an unknown key id is LF_SECRET_KEY_MISSING naming the id it needs', () => {
    const k1 = entry();
    const aad = vaultAad('variable', 't', 'k');
    const sealed = new Keyring(k1).seal(Buffer.from('v'), aad);
    const err = caught(() => new Keyring(entry()).open(sealed.cipher, sealed.key_id, aad));
    expect(err.code).toBe('LF_SECRET_KEY_MISSING');
    expect(err.message).toContain(k1.id);
    for (const form of keyForms(k1.key)) expect(err.message).not.toContain(form);
  });

  it('decrypt errors carry neither plaintext nor key material', () => {
    const k = entry();
    const ring = new Keyring(k);
    const canary = `CANARY-${randomBytes(8).toString('hex')}`;
    const aad = vaultAad('variable', 't', 'k');
    const sealed = ring.seal(Buffer.from(canary), aad);
    const bad = Uint8Array.from(sealed.cipher);
    bad[bad.length - 1] = (bad[bad.length - 1] ?? 0) ^ 0xff;
    const err = caught(() => ring.open(bad, sealed.key_id, aad));
    const everything = `${err.message} ${JSON.stringify(err.details)} ${String(err.stack)} ${inspect(err)}`;
    expect(everything).not.toContain(canary);
    for (const form of keyForms(k.key)) expect(everything).not.toContain(form);
    expect(err.cause).toBeUndefined();
  });

  it('never prints its keys (JSON, inspect, string)', () => {
    const k1 = entry();
    const k2 = entry();
    const ring = new Keyring(k1, [k2]);
    const shown = `${JSON.stringify(ring)} ${inspect(ring, { showHidden: true, depth: 10 })} ${String(ring)} ${JSON.stringify({ ...ring })}`;
    for (const k of [k1, k2]) for (const form of keyForms(k.key)) expect(shown).not.toContain(form);
    expect(shown).toContain(k1.id);
  });

  it('copies key bytes: zeroing the caller’s buffer does not change the keyring', () => {
    const key = randomBytes(32);
    const ring = new Keyring({ id: 'k-mine', key });
    const aad = vaultAad('variable', 't', 'k');
    const sealed = ring.seal(Buffer.from('v'), aad);
    key.fill(0);
    expect(Buffer.from(ring.open(sealed.cipher, 'k-mine', aad)).toString()).toBe('v');
  });

  it('rejects invalid ids and two different keys under one id, tolerates the same key twice', () => {
    const k = entry();
    expect(caught(() => new Keyring({ id: '', key: k.key })).code).toBe(
      'LF_SECRET_KEYRING_INVALID',
    );
    expect(caught(() => new Keyring({ id: 'has space', key: k.key })).code).toBe(
      'LF_SECRET_KEYRING_INVALID',
    );
    expect(caught(() => new Keyring(k, [{ id: k.id, key: randomBytes(32) }])).code).toBe(
      'LF_SECRET_KEYRING_INVALID',
    );
    expect(new Keyring(k, [{ id: k.id, key: Buffer.from(k.key) }]).keyIds()).toEqual([k.id]);
  });
});
