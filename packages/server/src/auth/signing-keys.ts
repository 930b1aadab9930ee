import { KeyObject, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { chmod, link, mkdir, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { LeoflowError, AuthError } from '@leoflow/core';
import { exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK } from 'jose';

/** Which audience a key signs for: agent and user tokens never share a key. */
export type KeyPurpose = 'agent' | 'user' | 'door';

/**
 * Ed25519 so that a verify-only component can hold the public half alone and mint nothing.
 * The only algorithm any Leoflow verifier accepts.
 */
export const SIGNING_ALG = 'EdDSA';

export interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
}

/** What a verifier needs: public keys by kid. Holds no minting power. */
export interface VerificationKeyring {
  /**
   * The public key for a token's `kid`, or undefined when unknown. With nowMs, a retired key past
   * its retention window is refused even before it is pruned from disk.
   */
  verificationKey(kid: string, nowMs?: number): CryptoKey | undefined;
  /** Public halves only, as a JWK Set (each with kid, alg, use). */
  publicJwks(): { keys: JWK[] };
  /**
   * Re-reads the key source after an unknown kid (a rotation by another process). Rate-limited by
   * the implementation; resolves true when the key set changed.
   */
  refresh?(): Promise<boolean>;
}

export interface SigningKeyring extends VerificationKeyring {
  readonly purpose: KeyPurpose;
  /** The newest non-retired key: the one that signs. */
  current(): SigningKey;
}

/** One key as stored on disk. A retired key keeps only its public half. */
interface StoredKey {
  kid: string;
  alg: typeof SIGNING_ALG;
  private_jwk?: JWK;
  public_jwk: JWK;
  created_at: string;
  retired_at?: string;
}

interface StoredKeyring {
  version: 1;
  purpose: KeyPurpose;
  keys: StoredKey[];
}

export interface KeyInfo {
  kid: string;
  created_at: string;
  retired_at?: string;
  signing: boolean;
}

export interface KeyringOptions {
  /**
   * How long a retired key keeps verifying, in seconds: at least the longest token TTL signed
   * with it plus the verifier's clock tolerance (see keyRetentionSeconds). Default: forever,
   * which is what keys signing tokens without `exp` (today's admin token) need.
   */
  retainSeconds?: number;
  /** The time of this load (pruning, a created key's created_at); defaults to clock(). */
  nowMs?: number;
  /** For later reloads, refreshes and rotations that are not given a time; default Date.now. */
  clock?: () => number;
}

/** Retention for a retired key: every token it signed has expired, even on a lagging verifier. */
export function keyRetentionSeconds(
  maxTokenTtlSeconds: number,
  clockToleranceSeconds: number,
): number {
  return maxTokenTtlSeconds + clockToleranceSeconds;
}

export function keyringFile(dataDir: string, purpose: KeyPurpose): string {
  return join(dataDir, 'keys', `${purpose}-signing-keys.json`);
}

/** The single-key file written before keyrings existed; migrated as the ring's first key. */
export function legacyKeyFile(dataDir: string, purpose: KeyPurpose): string {
  return join(dataDir, 'keys', `${purpose}-signing-key.json`);
}

interface Entry {
  stored: StoredKey;
  publicKey: CryptoKey;
  privateKey?: CryptoKey;
  createdMs: number;
  retiredMs?: number;
}

/** Only refresh from disk this often, so a flood of unknown kids cannot turn into file reads. */
const REFRESH_MIN_INTERVAL_MS = 5_000;

/**
 * The keyring for one purpose, backed by `<dataDir>/keys/<purpose>-signing-keys.json` (0600).
 * The newest non-retired key signs; retired keys verify until their retention ends, then are
 * pruned. Rotation is therefore downtime-free: tokens signed by the previous key keep verifying
 * while every new token (including heartbeat renewals) moves to the new key.
 */
export class FileSigningKeyring implements SigningKeyring {
  private entries: Entry[] = [];
  private signer!: SigningKey;
  private lastRefreshMs = Number.NEGATIVE_INFINITY;

  private constructor(
    readonly dataDir: string,
    readonly purpose: KeyPurpose,
    readonly retainSeconds: number,
    private readonly clock: () => number,
  ) {}

  static async load(
    dataDir: string,
    purpose: KeyPurpose,
    opts: KeyringOptions = {},
  ): Promise<FileSigningKeyring> {
    const retain = opts.retainSeconds ?? Number.POSITIVE_INFINITY;
    if (!(retain >= 0)) throw new RangeError('retainSeconds must be ≥ 0');
    const clock = opts.clock ?? Date.now;
    const ring = new FileSigningKeyring(dataDir, purpose, retain, clock);
    await ring.reload(opts.nowMs ?? clock());
    return ring;
  }

  /**
   * Re-reads the file (creating, migrating or pruning it as needed) and swaps the in-memory set
   * in one assignment, so concurrent signers see either the old or the new set.
   */
  async reload(nowMs: number = this.clock()): Promise<void> {
    const file = keyringFile(this.dataDir, this.purpose);
    await mkdir(join(this.dataDir, 'keys'), { recursive: true, mode: 0o700 });
    let stored = await readKeyring(file, this.purpose);
    if (!stored || needsPrune(stored, this.retainSeconds, nowMs) || !hasSigner(stored)) {
      stored = await withFileLock(file, async () => {
        let ring = await readKeyring(file, this.purpose);
        let dirty = false;
        if (!ring) {
          const legacy = await readLegacyKey(legacyKeyFile(this.dataDir, this.purpose));
          ring = {
            version: 1,
            purpose: this.purpose,
            keys: [legacy ?? (await newStoredKey(this.purpose, nowMs))],
          };
          dirty = true;
        }
        if (prune(ring, this.retainSeconds, nowMs)) dirty = true;
        if (!hasSigner(ring)) {
          // Every key retired (hand-edited file): a ring must always be able to sign.
          ring.keys.push(await newStoredKey(this.purpose, nowMs));
          dirty = true;
        }
        if (dirty) await writeKeyring(file, ring);
        return ring;
      });
    }
    await this.adopt(stored);
    await this.dropMigratedLegacyFile();
  }

  /**
   * Once the old single-key file's key is in the ring, the ring is authoritative and a second
   * copy of that private key must not linger beside it. A legacy file holding some other key is
   * left alone: deleting key material we did not migrate is not ours to do.
   */
  private async dropMigratedLegacyFile(): Promise<void> {
    const file = legacyKeyFile(this.dataDir, this.purpose);
    let legacy: StoredKey | undefined;
    try {
      legacy = await readLegacyKey(file);
    } catch {
      return;
    }
    if (legacy && this.entries.some((e) => e.stored.kid === legacy.kid))
      await unlinkIfPresent(file);
  }

  /** Adds a new signing key and retires the previous one(s); returns the new kid. */
  async rotate(nowMs: number = this.clock()): Promise<string> {
    const file = keyringFile(this.dataDir, this.purpose);
    await mkdir(join(this.dataDir, 'keys'), { recursive: true, mode: 0o700 });
    let kid = '';
    const stored = await withFileLock(file, async () => {
      const ring = (await readKeyring(file, this.purpose)) ?? {
        version: 1 as const,
        purpose: this.purpose,
        keys: [],
      };
      const at = new Date(nowMs).toISOString();
      for (const k of ring.keys) {
        if (k.retired_at === undefined) {
          k.retired_at = at;
          // A retired key never signs again, so its private half has no further use on disk.
          delete k.private_jwk;
        }
      }
      const fresh = await newStoredKey(this.purpose, nowMs);
      kid = fresh.kid;
      ring.keys.push(fresh);
      prune(ring, this.retainSeconds, nowMs);
      await writeKeyring(file, ring);
      return ring;
    });
    await this.adopt(stored);
    return kid;
  }

  current(): SigningKey {
    return this.signer;
  }

  verificationKey(kid: string, nowMs?: number): CryptoKey | undefined {
    const e = this.entries.find((x) => x.stored.kid === kid);
    if (!e) return undefined;
    if (
      nowMs !== undefined &&
      e.retiredMs !== undefined &&
      nowMs > e.retiredMs + this.retainSeconds * 1000
    ) {
      return undefined;
    }
    return e.publicKey;
  }

  publicJwks(): { keys: JWK[] } {
    return { keys: this.entries.map((e) => publicJwkOf(e.stored)) };
  }

  async refresh(): Promise<boolean> {
    const t = performance.now();
    if (t - this.lastRefreshMs < REFRESH_MIN_INTERVAL_MS) return false;
    this.lastRefreshMs = t;
    const before = this.entries.map((e) => `${e.stored.kid}/${e.stored.retired_at ?? ''}`).join();
    await this.reload();
    return (
      before !== this.entries.map((e) => `${e.stored.kid}/${e.stored.retired_at ?? ''}`).join()
    );
  }

  /** For `leoflow doctor` and logs: key ids and dates, never key material. */
  describe(): KeyInfo[] {
    return this.entries.map((e) => ({
      kid: e.stored.kid,
      created_at: e.stored.created_at,
      ...(e.stored.retired_at !== undefined ? { retired_at: e.stored.retired_at } : {}),
      signing: e.stored.kid === this.signer.kid,
    }));
  }

  private async adopt(ring: StoredKeyring): Promise<void> {
    const entries: Entry[] = [];
    for (const k of ring.keys) {
      const entry: Entry = {
        stored: k,
        publicKey: (await importJWK(k.public_jwk, SIGNING_ALG)) as CryptoKey,
        createdMs: Date.parse(k.created_at),
      };
      if (k.retired_at !== undefined) entry.retiredMs = Date.parse(k.retired_at);
      else if (k.private_jwk)
        entry.privateKey = (await importJWK(k.private_jwk, SIGNING_ALG)) as CryptoKey;
      entries.push(entry);
    }
    const signing = newestSigner(entries);
    if (!signing?.privateKey) {
      throw keyringError(keyringFile(this.dataDir, this.purpose), 'it has no key that can sign');
    }
    this.signer = {
      kid: signing.stored.kid,
      privateKey: signing.privateKey,
      publicKey: signing.publicKey,
    };
    this.entries = entries;
  }
}

/** Public keys only, e.g. from the control plane's JWKS: can verify, cannot mint. */
export class VerifyOnlyKeyring implements VerificationKeyring {
  private constructor(
    private readonly keys: ReadonlyMap<string, CryptoKey>,
    private readonly jwks: JWK[],
  ) {}

  static async fromJwks(jwks: { keys: readonly JWK[] }): Promise<VerifyOnlyKeyring> {
    const map = new Map<string, CryptoKey>();
    const pub: JWK[] = [];
    for (const jwk of jwks.keys) {
      if (typeof jwk.kid !== 'string' || jwk.kid === '') throw new Error('a JWK without a kid');
      if ('d' in jwk) {
        // Accepting it would quietly give a verify-only replica minting power.
        throw new Error(
          `JWK ${jwk.kid} carries private key material; a verify-only keyring refuses it`,
        );
      }
      if (jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519' || typeof jwk.x !== 'string') {
        throw new Error(`JWK ${jwk.kid} is not an Ed25519 public key`);
      }
      if (jwk.alg !== undefined && jwk.alg !== SIGNING_ALG) {
        throw new Error(`JWK ${jwk.kid} is for ${jwk.alg}, not ${SIGNING_ALG}`);
      }
      if (map.has(jwk.kid)) throw new Error(`duplicate kid ${jwk.kid}`);
      const clean: JWK = {
        kty: 'OKP',
        crv: 'Ed25519',
        x: jwk.x,
        kid: jwk.kid,
        alg: SIGNING_ALG,
        use: 'sig',
      };
      map.set(jwk.kid, (await importJWK(clean, SIGNING_ALG)) as CryptoKey);
      pub.push(clean);
    }
    return new VerifyOnlyKeyring(map, pub);
  }

  verificationKey(kid: string): CryptoKey | undefined {
    return this.keys.get(kid);
  }

  publicJwks(): { keys: JWK[] } {
    return { keys: this.jwks.map((k) => ({ ...k })) };
  }
}

/**
 * A ring of exactly one in-memory key: for callers (and tests) that still hold a bare
 * SigningKey. It cannot rotate.
 */
export function singleKeyRing(purpose: KeyPurpose, key: SigningKey): SigningKeyring {
  return {
    purpose,
    current: () => key,
    verificationKey: (kid) => (kid === key.kid ? key.publicKey : undefined),
    publicJwks: () => {
      // KeyObject export is synchronous (jose's exportJWK is not), so this can stay a getter.
      const j = KeyObject.from(key.publicKey).export({
        format: 'jwk',
      });
      return {
        keys: [{ kty: j.kty, crv: j.crv, x: j.x, kid: key.kid, alg: SIGNING_ALG, use: 'sig' }],
      };
    },
  };
}

export function loadSigningKeyring(
  dataDir: string,
  purpose: KeyPurpose,
  opts: KeyringOptions = {},
): Promise<FileSigningKeyring> {
  return FileSigningKeyring.load(dataDir, purpose, opts);
}

/**
 * Adds a new signing key for the purpose and retires the previous one, without downtime: tokens
 * signed by the old key keep verifying until its retention ends. A running server that did not
 * perform the rotation itself picks it up on its next refresh()/reload().
 */
export async function rotateSigningKey(
  dataDir: string,
  purpose: KeyPurpose,
  nowMs: number,
  opts: Omit<KeyringOptions, 'nowMs'> = {},
): Promise<FileSigningKeyring> {
  const ring = await FileSigningKeyring.load(dataDir, purpose, { ...opts, nowMs });
  await ring.rotate(nowMs);
  return ring;
}

/**
 * The current signing key of the purpose's keyring (migrating the old single-key file, or
 * creating a ring, on first use). Kept for callers that sign with one key and verify only their
 * own tokens; new code should hold the keyring from loadSigningKeyring so verification follows
 * rotation.
 */
export async function loadOrCreateSigningKey(
  dataDir: string,
  purpose: KeyPurpose,
): Promise<SigningKey> {
  return (await FileSigningKeyring.load(dataDir, purpose)).current();
}

// ---------------------------------------------------------------------------------------------

async function newStoredKey(purpose: KeyPurpose, nowMs: number): Promise<StoredKey> {
  const pair = await generateKeyPair(SIGNING_ALG, { crv: 'Ed25519', extractable: true });
  return {
    kid: `${purpose}-${randomUUID()}`,
    alg: SIGNING_ALG,
    private_jwk: await exportJWK(pair.privateKey),
    public_jwk: await exportJWK(pair.publicKey),
    created_at: new Date(nowMs).toISOString(),
  };
}

function publicJwkOf(k: StoredKey): JWK {
  const { kty, crv, x } = k.public_jwk;
  return { kty, crv, x, kid: k.kid, alg: SIGNING_ALG, use: 'sig' };
}

function hasSigner(ring: StoredKeyring): boolean {
  return ring.keys.some((k) => k.retired_at === undefined && k.private_jwk !== undefined);
}

function newestSigner(entries: readonly Entry[]): Entry | undefined {
  let best: Entry | undefined;
  // Ties on created_at go to the later entry: rotation appends.
  for (const e of entries) {
    if (e.retiredMs !== undefined || !e.privateKey) continue;
    if (!best || e.createdMs >= best.createdMs) best = e;
  }
  return best;
}

function expiredRetiree(k: StoredKey, retainSeconds: number, nowMs: number): boolean {
  return k.retired_at !== undefined && nowMs > Date.parse(k.retired_at) + retainSeconds * 1000;
}

function needsPrune(ring: StoredKeyring, retainSeconds: number, nowMs: number): boolean {
  return ring.keys.some((k) => expiredRetiree(k, retainSeconds, nowMs));
}

function prune(ring: StoredKeyring, retainSeconds: number, nowMs: number): boolean {
  const before = ring.keys.length;
  ring.keys = ring.keys.filter((k) => !expiredRetiree(k, retainSeconds, nowMs));
  return ring.keys.length !== before;
}

async function readKeyring(file: string, purpose: KeyPurpose): Promise<StoredKeyring | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  await tightenMode(file);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw keyringError(file, 'it is not valid JSON');
  }
  const ring = parsed as Partial<StoredKeyring>;
  if (!ring || typeof ring !== 'object' || !Array.isArray(ring.keys) || ring.keys.length === 0) {
    throw keyringError(file, 'it holds no keys');
  }
  if (ring.purpose !== undefined && ring.purpose !== purpose) {
    throw keyringError(file, `it holds ${String(ring.purpose)} keys, not ${purpose} keys`);
  }
  for (const k of ring.keys) checkStoredKey(k, file);
  return { version: 1, purpose, keys: ring.keys };
}

async function readLegacyKey(file: string): Promise<StoredKey | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  let k: unknown;
  try {
    k = JSON.parse(text);
  } catch {
    throw keyringError(file, 'it is not valid JSON');
  }
  checkStoredKey(k, file);
  const s = k;
  if (!s.private_jwk) throw keyringError(file, 'it has no private key');
  return {
    kid: s.kid,
    alg: SIGNING_ALG,
    private_jwk: s.private_jwk,
    public_jwk: s.public_jwk,
    created_at: s.created_at,
  };
}

function checkStoredKey(k: unknown, file: string): asserts k is StoredKey {
  const s = k as Partial<StoredKey> | null;
  const ok =
    !!s &&
    typeof s.kid === 'string' &&
    s.kid !== '' &&
    (s.alg === undefined || s.alg === SIGNING_ALG) &&
    typeof s.created_at === 'string' &&
    !Number.isNaN(Date.parse(s.created_at)) &&
    (s.retired_at === undefined ||
      (typeof s.retired_at === 'string' && !Number.isNaN(Date.parse(s.retired_at)))) &&
    isEd25519(s.public_jwk, false) &&
    (s.private_jwk === undefined || isEd25519(s.private_jwk, true));
  // Never echo the entry: it may contain private key material.
  if (!ok) throw keyringError(file, 'an entry is malformed');
  if (s.alg === undefined) s.alg = SIGNING_ALG;
}

function isEd25519(jwk: unknown, priv: boolean): boolean {
  const j = jwk as JWK | undefined;
  return (
    !!j &&
    j.kty === 'OKP' &&
    j.crv === 'Ed25519' &&
    typeof j.x === 'string' &&
    (priv ? typeof j.d === 'string' : j.d === undefined)
  );
}

function keyringError(file: string, why: string): LeoflowError {
  return new AuthError(
    'LF_KEYRING_INVALID',
    `signing keyring ${file} cannot be used: ${why}. Restore it from backup; deleting it makes ` +
      'every outstanding token of that kind invalid.',
    { file },
  );
}

async function writeKeyring(file: string, ring: StoredKeyring): Promise<void> {
  // Write-then-rename: a reader never sees half a keyring, and a crash leaves the old one.
  const tmp = `${file}.${process.pid}.${randomUUID()}.tmp`;
  await writeFile(tmp, `${JSON.stringify(ring, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
  try {
    await rename(tmp, file);
  } catch (err) {
    await unlinkIfPresent(tmp);
    throw err;
  }
  await chmod(file, 0o600);
}

async function tightenMode(file: string): Promise<void> {
  const st = await stat(file);
  if ((st.mode & 0o077) !== 0) await chmod(file, 0o600);
}

async function unlinkIfPresent(file: string): Promise<void> {
  try {
    await unlink(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}

const LOCK_WAIT_MS = 10_000;
const LOCK_STALE_MS = 30_000;

/**
 * Serialises read-modify-write of a keyring across processes (a CLI rotation beside a running
 * server), so neither can write back a copy missing the other's key.
 */
async function withFileLock<T>(file: string, fn: () => Promise<T>): Promise<T> {
  const lock = `${file}.lock`;
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      const tmp = `${lock}.${process.pid}.${randomUUID()}`;
      await writeFile(tmp, String(process.pid), { mode: 0o600, flag: 'wx' });
      try {
        // link() fails with EEXIST atomically, unlike a check-then-create.
        await link(tmp, lock);
      } finally {
        await unlinkIfPresent(tmp);
      }
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const st = await stat(lock).catch(() => undefined);
      if (st && Date.now() - st.mtimeMs > LOCK_STALE_MS) {
        await unlinkIfPresent(lock);
        continue;
      }
      if (Date.now() > deadline) {
        throw new AuthError(
          'LF_KEYRING_LOCKED',
          `signing keyring ${file} is locked by another process (${lock}); retry, or remove the ` +
            'lock file if no Leoflow process is running',
          { file },
        );
      }
      await new Promise((r) => setTimeout(r, 25));
    }
  }
  try {
    return await fn();
  } finally {
    await unlinkIfPresent(lock);
  }
}
