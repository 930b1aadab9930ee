import { randomUUID } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK } from 'jose';

/** Which audience a key signs for: agent and user tokens never share a key. */
export type KeyPurpose = 'agent' | 'user';

export interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
}

interface StoredKey {
  kid: string;
  alg: 'EdDSA';
  private_jwk: JWK;
  public_jwk: JWK;
  created_at: string;
}

export const SIGNING_ALG = 'EdDSA';

/**
 * Loads the Ed25519 signing key for a purpose from the data directory, creating it (mode 0600)
 * on first start. Ed25519 so that a verify-only replica can hold the public half alone.
 */
export async function loadOrCreateSigningKey(
  dataDir: string,
  purpose: KeyPurpose,
): Promise<SigningKey> {
  const dir = join(dataDir, 'keys');
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, `${purpose}-signing-key.json`);
  let stored: StoredKey;
  try {
    stored = JSON.parse(await readFile(file, 'utf8')) as StoredKey;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    const pair = await generateKeyPair(SIGNING_ALG, { crv: 'Ed25519', extractable: true });
    stored = {
      kid: `${purpose}-${randomUUID()}`,
      alg: SIGNING_ALG,
      private_jwk: await exportJWK(pair.privateKey),
      public_jwk: await exportJWK(pair.publicKey),
      created_at: new Date().toISOString(),
    };
    // 'wx' so two processes starting at once cannot both write a different key.
    try {
      await writeFile(file, JSON.stringify(stored), { mode: 0o600, flag: 'wx' });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      stored = JSON.parse(await readFile(file, 'utf8')) as StoredKey;
    }
  }
  return {
    kid: stored.kid,
    privateKey: (await importJWK(stored.private_jwk, SIGNING_ALG)) as CryptoKey,
    publicKey: (await importJWK(stored.public_jwk, SIGNING_ALG)) as CryptoKey,
  };
}
