import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeProtectedHeader, exportJWK, generateKeyPair, type JWK } from 'jose';
import { describe, expect, it } from 'vitest';
import { AgentTokenIssuer, AgentTokenVerifier } from '../../src/auth/agent-token.js';
import {
  FileSigningKeyring,
  VerifyOnlyKeyring,
  keyRetentionSeconds,
  keyringFile,
  legacyKeyFile,
  loadOrCreateSigningKey,
  loadSigningKeyring,
  rotateSigningKey,
  singleKeyRing,
} from '../../src/auth/signing-keys.js';
import { HOUR, MIN, T0, identity, useTempDirs } from './fixtures.js';

const tempDir = useTempDirs();
const TTL = 600;
const RETAIN = keyRetentionSeconds(TTL, 5);

interface StoredFile {
  version: number;
  purpose: string;
  keys: {
    kid: string;
    private_jwk?: JWK;
    public_jwk: JWK;
    created_at: string;
    retired_at?: string;
  }[];
}
const readRing = (dir: string, purpose: 'agent' | 'user' = 'agent') =>
  JSON.parse(readFileSync(keyringFile(dir, purpose), 'utf8')) as StoredFile;
const mode = (file: string) => statSync(file).mode & 0o777;

async function writeLegacyKey(dir: string, purpose: 'agent' | 'user', kid: string) {
  mkdirSync(join(dir, 'keys'), { recursive: true });
  const pair = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
  writeFileSync(
    legacyKeyFile(dir, purpose),
    JSON.stringify({
      kid,
      alg: 'EdDSA',
      private_jwk: await exportJWK(pair.privateKey),
      public_jwk: await exportJWK(pair.publicKey),
      created_at: new Date(T0 - 30 * 86_400_000).toISOString(),
    }),
    { mode: 0o600 },
  );
  return { kid, privateKey: pair.privateKey, publicKey: pair.publicKey };
}

describe('keyring file', () => {
  it('is created on first load, owner-only, and stable across loads', async () => {
    const dir = tempDir();
    const a = await loadSigningKeyring(dir, 'agent', { nowMs: T0 });
    const file = keyringFile(dir, 'agent');
    expect(file).toBe(join(dir, 'keys', 'agent-signing-keys.json'));
    expect(mode(file)).toBe(0o600);
    expect(mode(join(dir, 'keys'))).toBe(0o700);
    const b = await loadSigningKeyring(dir, 'agent', { nowMs: T0 + HOUR });
    expect(b.current().kid).toBe(a.current().kid);
    expect(a.current().kid).toMatch(/^agent-/);
    const stored = readRing(dir);
    expect(stored.keys).toHaveLength(1);
    expect(stored.keys[0]).toMatchObject({
      kid: a.current().kid,
      created_at: new Date(T0).toISOString(),
    });
    expect(stored.keys[0]?.private_jwk?.d).toEqual(expect.any(String));
  });

  it('keeps agent and user keys apart', async () => {
    const dir = tempDir();
    const agent = await loadSigningKeyring(dir, 'agent');
    const user = await loadSigningKeyring(dir, 'user');
    expect(agent.current().kid).not.toBe(user.current().kid);
    expect(agent.verificationKey(user.current().kid)).toBeUndefined();
    expect(user.verificationKey(agent.current().kid)).toBeUndefined();
  });

  it('concurrent first starts agree on one key', async () => {
    const dir = tempDir();
    const rings = await Promise.all(
      Array.from({ length: 6 }, () => FileSigningKeyring.load(dir, 'agent')),
    );
    expect(new Set(rings.map((r) => r.current().kid)).size).toBe(1);
    expect(readRing(dir).keys).toHaveLength(1);
  });

  it('is tightened back to 0600 if its mode was loosened', async () => {
    const dir = tempDir();
    await loadSigningKeyring(dir, 'agent');
    chmodSync(keyringFile(dir, 'agent'), 0o644);
    await loadSigningKeyring(dir, 'agent');
    expect(mode(keyringFile(dir, 'agent'))).toBe(0o600);
  });

  it('refuses a corrupt file without echoing its content', async () => {
    const dir = tempDir();
    await loadSigningKeyring(dir, 'agent');
    writeFileSync(
      keyringFile(dir, 'agent'),
      '{"keys":[{"kid":"k","private_jwk":{"d":"SECRETSECRET"}}]}',
    );
    const err = await loadSigningKeyring(dir, 'agent').catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'LF_KEYRING_INVALID' });
    expect((err as Error).message).toContain('agent-signing-keys.json');
    expect((err as Error).message).not.toContain('SECRETSECRET');
  });

  it('refuses a file holding the other purpose', async () => {
    const dir = tempDir();
    await loadSigningKeyring(dir, 'user');
    writeFileSync(keyringFile(dir, 'agent'), readFileSync(keyringFile(dir, 'user')));
    await expect(loadSigningKeyring(dir, 'agent')).rejects.toMatchObject({
      code: 'LF_KEYRING_INVALID',
    });
  });

  it('publishes public halves only, each with kid, alg and use', async () => {
    const ring = await loadSigningKeyring(tempDir(), 'agent');
    await ring.rotate(T0);
    const { keys } = ring.publicJwks();
    expect(keys).toHaveLength(2);
    for (const k of keys) {
      expect(k).not.toHaveProperty('d');
      expect(k).toMatchObject({ kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA', use: 'sig' });
      expect(k.kid).toEqual(expect.any(String));
    }
  });
});

describe('migration from the single-key file', () => {
  it('loads the old key as the first key, so tokens it signed keep verifying', async () => {
    const dir = tempDir();
    const legacy = await writeLegacyKey(dir, 'agent', 'agent-legacy-1');
    const before = new AgentTokenIssuer(legacy, TTL);
    const oldToken = await before.mint(identity, T0);

    const ring = await loadSigningKeyring(dir, 'agent', { nowMs: T0 });
    expect(ring.current().kid).toBe('agent-legacy-1');
    const after = new AgentTokenIssuer(ring, TTL);
    await expect(after.verify(oldToken, T0 + MIN)).resolves.toMatchObject({ task_id: 'extract' });
    // The ring is now authoritative; the second copy of the private key is gone.
    expect(existsSync(legacyKeyFile(dir, 'agent'))).toBe(false);
    expect(readRing(dir).keys.map((k) => k.kid)).toEqual(['agent-legacy-1']);
  });

  it('loadOrCreateSigningKey still returns a working key (and migrates)', async () => {
    const dir = tempDir();
    await writeLegacyKey(dir, 'user', 'user-legacy-1');
    const key = await loadOrCreateSigningKey(dir, 'user');
    expect(key.kid).toBe('user-legacy-1');
    expect(existsSync(keyringFile(dir, 'user'))).toBe(true);
    const again = await loadOrCreateSigningKey(dir, 'user');
    expect(again.kid).toBe('user-legacy-1');
  });

  it('a rotated migrated ring retires the legacy key like any other', async () => {
    const dir = tempDir();
    await writeLegacyKey(dir, 'agent', 'agent-legacy-1');
    const ring = await rotateSigningKey(dir, 'agent', T0, { retainSeconds: RETAIN });
    expect(ring.current().kid).not.toBe('agent-legacy-1');
    const legacy = readRing(dir).keys.find((k) => k.kid === 'agent-legacy-1');
    expect(legacy?.retired_at).toBe(new Date(T0).toISOString());
    expect(legacy?.private_jwk).toBeUndefined();
  });
});

describe('rotation', () => {
  it('signs with the new key at once and keeps verifying the old one (no downtime)', async () => {
    const dir = tempDir();
    const ring = await loadSigningKeyring(dir, 'agent', { nowMs: T0, retainSeconds: RETAIN });
    const issuer = new AgentTokenIssuer(ring, TTL);
    const oldKid = ring.current().kid;
    const oldToken = await issuer.mint(identity, T0);

    const newKid = await ring.rotate(T0 + MIN);
    expect(newKid).not.toBe(oldKid);
    expect(ring.current().kid).toBe(newKid);
    const newToken = await issuer.mint(identity, T0 + MIN);
    expect(decodeProtectedHeader(newToken).kid).toBe(newKid);
    // Availability: both generations verify while the old token is within its TTL.
    await expect(issuer.verify(oldToken, T0 + 2 * MIN)).resolves.toMatchObject({ try_number: 1 });
    await expect(issuer.verify(newToken, T0 + 2 * MIN)).resolves.toMatchObject({ try_number: 1 });

    const stored = readRing(dir);
    expect(stored.keys.map((k) => k.kid)).toEqual([oldKid, newKid]);
    expect(stored.keys[0]?.retired_at).toBe(new Date(T0 + MIN).toISOString());
    // A retired key never signs again, so its private half is not kept.
    expect(stored.keys[0]?.private_jwk).toBeUndefined();
    expect(stored.keys[1]?.retired_at).toBeUndefined();
  });

  it('renewing an old-key token moves the attempt onto the new key', async () => {
    const ring = await loadSigningKeyring(tempDir(), 'agent', { nowMs: T0, retainSeconds: RETAIN });
    const issuer = new AgentTokenIssuer(ring, TTL);
    const oldToken = await issuer.mint(identity, T0);
    const newKid = await ring.rotate(T0 + MIN);
    const claims = await issuer.verify(oldToken, T0 + 2 * MIN);
    const renewed = await issuer.renew(claims, T0 + 2 * MIN, 24 * HOUR);
    if (!('token' in renewed)) throw new Error('expected a token');
    expect(decodeProtectedHeader(renewed.token).kid).toBe(newKid);
  });

  it('a retired key verifies for retainSeconds, then is refused and pruned', async () => {
    const dir = tempDir();
    const ring = await loadSigningKeyring(dir, 'agent', { nowMs: T0, retainSeconds: RETAIN });
    const oldKid = ring.current().kid;
    await ring.rotate(T0);
    expect(ring.verificationKey(oldKid, T0 + RETAIN * 1000)).toBeDefined();
    expect(ring.verificationKey(oldKid, T0 + RETAIN * 1000 + 1)).toBeUndefined();

    const within = await loadSigningKeyring(dir, 'agent', {
      nowMs: T0 + RETAIN * 1000,
      retainSeconds: RETAIN,
    });
    expect(within.verificationKey(oldKid)).toBeDefined();
    const after = await loadSigningKeyring(dir, 'agent', {
      nowMs: T0 + RETAIN * 1000 + 1,
      retainSeconds: RETAIN,
    });
    expect(after.verificationKey(oldKid)).toBeUndefined();
    expect(readRing(dir).keys.map((k) => k.kid)).toEqual([after.current().kid]);
  });

  it('an old token stops verifying once its key is past retention even if exp were later', async () => {
    // Retention shorter than the TTL is a misconfiguration; the key window still wins.
    const ring = await loadSigningKeyring(tempDir(), 'agent', { nowMs: T0, retainSeconds: 60 });
    const issuer = new AgentTokenIssuer(ring, TTL, { clockToleranceSeconds: 0 });
    const token = await issuer.mint(identity, T0);
    await ring.rotate(T0);
    await expect(issuer.verify(token, T0 + 60_000)).resolves.toBeDefined();
    await expect(issuer.verify(token, T0 + 61_000)).rejects.toMatchObject({ reason: 'invalid' });
  });

  it('a rotation by another process is picked up on the first unknown kid', async () => {
    const dir = tempDir();
    const serving = await loadSigningKeyring(dir, 'agent', { nowMs: T0, retainSeconds: RETAIN });
    const verifier = new AgentTokenIssuer(serving, TTL);
    const other = await rotateSigningKey(dir, 'agent', T0, { retainSeconds: RETAIN });
    const token = await new AgentTokenIssuer(other, TTL).mint(identity, T0);
    expect(serving.verificationKey(other.current().kid)).toBeUndefined();
    await expect(verifier.verify(token, T0 + 1000)).resolves.toMatchObject({ run_id: 'run-1' });
    expect(serving.current().kid).toBe(other.current().kid);
  });

  it('repeated rotations keep every key still in retention', async () => {
    const dir = tempDir();
    const ring = await loadSigningKeyring(dir, 'agent', { nowMs: T0, retainSeconds: RETAIN });
    const first = ring.current().kid;
    const second = await ring.rotate(T0 + MIN);
    const third = await ring.rotate(T0 + 2 * MIN);
    expect(ring.current().kid).toBe(third);
    for (const kid of [first, second, third]) {
      expect(ring.verificationKey(kid, T0 + 3 * MIN)).toBeDefined();
    }
    expect(ring.describe().map((k) => [k.kid, k.signing])).toEqual([
      [first, false],
      [second, false],
      [third, true],
    ]);
    // Rotating long after: the earlier retirees are pruned from disk in the same write.
    const fourth = await ring.rotate(T0 + 2 * MIN + (RETAIN + 1) * 1000);
    expect(readRing(dir).keys.map((k) => k.kid)).toEqual([third, fourth]);
  });
});

describe('verify-only keyring', () => {
  it('verifies the issuer’s tokens from its JWKS alone and cannot mint', async () => {
    const ring = await loadSigningKeyring(tempDir(), 'agent');
    const issuer = new AgentTokenIssuer(ring, TTL);
    const token = await issuer.mint(identity, T0);
    const replica = await VerifyOnlyKeyring.fromJwks(
      JSON.parse(JSON.stringify(ring.publicJwks())) as { keys: JWK[] },
    );
    expect('current' in replica).toBe(false);
    const verifier = new AgentTokenVerifier(replica);
    await expect(verifier.verify(token, T0 + 1000)).resolves.toMatchObject({
      task_instance_id: 'ti-1',
    });
    // No constructor path turns it into an issuer.
    expect(() => new AgentTokenIssuer(replica as never, TTL)).toThrow();
  });

  it('refuses private key material', async () => {
    const pair = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
    const priv = { ...(await exportJWK(pair.privateKey)), kid: 'k1' };
    await expect(VerifyOnlyKeyring.fromJwks({ keys: [priv] })).rejects.toThrow(/private key/);
  });

  it('refuses non-Ed25519 keys, missing kids and duplicates', async () => {
    const ec = await generateKeyPair('ES256', { extractable: true });
    const ecJwk = { ...(await exportJWK(ec.publicKey)), kid: 'ec' };
    await expect(VerifyOnlyKeyring.fromJwks({ keys: [ecJwk] })).rejects.toThrow(/Ed25519/);
    const ed = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
    const pub = await exportJWK(ed.publicKey);
    await expect(VerifyOnlyKeyring.fromJwks({ keys: [pub] })).rejects.toThrow(/kid/);
    await expect(
      VerifyOnlyKeyring.fromJwks({
        keys: [
          { ...pub, kid: 'a' },
          { ...pub, kid: 'a' },
        ],
      }),
    ).rejects.toThrow(/duplicate/);
    await expect(
      VerifyOnlyKeyring.fromJwks({ keys: [{ ...pub, kid: 'a', alg: 'RS256' }] }),
    ).rejects.toThrow(/RS256/);
  });

  it('a single in-memory key exposes its public JWK', async () => {
    const key = await loadOrCreateSigningKey(tempDir(), 'agent');
    const ring = singleKeyRing('agent', key);
    const { keys } = ring.publicJwks();
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatchObject({ kid: key.kid, kty: 'OKP', crv: 'Ed25519' });
    expect(keys[0]).not.toHaveProperty('d');
    const replica = await VerifyOnlyKeyring.fromJwks(ring.publicJwks());
    expect(replica.verificationKey(key.kid)).toBeDefined();
  });
});
