import { createHash, KeyObject, sign as signDetached } from 'node:crypto';
import {
  decodeProtectedHeader,
  errors as joseErrors,
  jwtVerify,
  SignJWT,
  type CryptoKey,
  type JWTHeaderParameters,
} from 'jose';
import {
  SIGNING_ALG,
  singleKeyRing,
  type SigningKey,
  type SigningKeyring,
  type VerificationKeyring,
} from './signing-keys.js';

export const AGENT_AUDIENCE = 'leoflow-agent';
export const TOKEN_ISSUER = 'leoflow';

/**
 * Seconds of clock skew a verifier forgives on `exp`/`nbf`. 5 s: enough for NTP-synced replicas
 * that mint and verify on different hosts, small next to the 10 min token TTL, so it never
 * meaningfully extends a captured token. In Lite minting and verification share one clock.
 */
export const AGENT_TOKEN_CLOCK_TOLERANCE_SECONDS = 5;
const MAX_CLOCK_TOLERANCE_SECONDS = 10;

/** The identity one attempt's credential carries; the server trusts nothing else from the agent. */
export interface AttemptIdentity {
  tenant_id: string;
  dag_id: string;
  /** dag_runs.id (internal) */
  dag_run_id: string;
  /** the run's user-facing run_id */
  run_id: string;
  task_id: string;
  /**
   * The task instance's map index (issue 41): -1 or absent for a task that is not mapped. Claim
   * `mi`, present only for a map index (≥ 0), so tokens of unmapped tasks are unchanged. Liveness
   * and every fence key on it with run, task and try (seed 001's D3: no other term).
   */
  map_index?: number;
  try_number: number;
  task_instance_id: string;
  /**
   * Which dispatch of the try this credential belongs to (task_instances.dispatch_gen at claim
   * time). A claim orphaned by a crash is reset without bumping the try; the next dispatch gets a
   * new generation, and a token of the old one no longer matches the row. Absent = 0 (tokens
   * minted before the column existed, for rows that still carry 0).
   */
  dispatch_gen?: number;
}

export interface AgentTokenClaims extends AttemptIdentity {
  dispatch_gen: number;
  map_index: number;
  iat: number;
  exp: number;
  /** original issue time, kept across renewals (the ceiling is measured from it) */
  oiat: number;
}

export class AgentTokenError extends Error {
  constructor(readonly reason: 'expired' | 'invalid') {
    super(reason === 'expired' ? 'agent token expired' : 'invalid agent token');
  }
}

/** What the RPC layer needs: anything that turns a bearer into verified claims. */
export interface AgentTokenVerification {
  verify(token: string, nowMs: number): Promise<AgentTokenClaims>;
  /**
   * Like verify, but a token past its exp still verifies: signature (kid, EdDSA), audience,
   * issuer, nbf and the identity claims are all checked; only the expiry is not. For Heartbeat
   * and ReportState, which carry no secret and must let a task whose renewal stopped finish
   * (docs/credentials.md, "An expired credential"); never for anything that returns a secret.
   */
  verifyIgnoringExpiry?(token: string, nowMs: number): Promise<AgentTokenClaims>;
}

/** A renewal: the token and the claims it carries (what verifying it would return). */
export type RenewResult = { token: string; claims: AgentTokenClaims } | { stopped: 'ceiling' };

export interface AgentTokenVerifierOptions {
  /** 0..10 s; default AGENT_TOKEN_CLOCK_TOLERANCE_SECONDS */
  clockToleranceSeconds?: number;
}

/**
 * Verifies agent tokens against public keys only, so a verify-only replica built from the
 * control plane's JWKS can authenticate agents without being able to mint for them.
 */
export class AgentTokenVerifier implements AgentTokenVerification {
  readonly clockToleranceSeconds: number;

  constructor(
    private readonly keys: VerificationKeyring,
    opts: AgentTokenVerifierOptions = {},
  ) {
    const tol = opts.clockToleranceSeconds ?? AGENT_TOKEN_CLOCK_TOLERANCE_SECONDS;
    if (!Number.isFinite(tol) || tol < 0 || tol > MAX_CLOCK_TOLERANCE_SECONDS) {
      throw new RangeError(
        `clock tolerance must be 0..${MAX_CLOCK_TOLERANCE_SECONDS} s, got ${String(tol)}`,
      );
    }
    this.clockToleranceSeconds = tol;
  }

  async verify(token: string, nowMs: number): Promise<AgentTokenClaims> {
    try {
      const key = await this.keyFor(token, nowMs);
      const { payload } = await jwtVerify(token, key, {
        // Only EdDSA: `none`, HS256 (a public key misused as an HMAC secret) and RS/ES are refused
        // before any signature work.
        algorithms: [SIGNING_ALG],
        audience: AGENT_AUDIENCE,
        issuer: TOKEN_ISSUER,
        requiredClaims: ['exp', 'iat', 'sub'],
        currentDate: new Date(nowMs),
        clockTolerance: this.clockToleranceSeconds,
      });
      return claimsOf(payload);
    } catch (err) {
      if (err instanceof AgentTokenError) throw err;
      if (err instanceof joseErrors.JWTExpired) throw new AgentTokenError('expired');
      throw new AgentTokenError('invalid');
    }
  }

  async verifyIgnoringExpiry(token: string, nowMs: number): Promise<AgentTokenClaims> {
    try {
      return await this.verify(token, nowMs);
    } catch (err) {
      if (!(err instanceof AgentTokenError) || err.reason !== 'expired') throw err;
    }
    // Expired: verify again as of one second before its own exp, so every other check (key,
    // signature, audience, issuer, nbf, identity claims) still runs in full. The key must still
    // be a verification key now (a retired key's tokens stop here once it is dropped).
    const exp = expOf(token);
    if (exp === undefined || exp * 1000 > nowMs) throw new AgentTokenError('invalid');
    const key = await this.keyFor(token, nowMs);
    try {
      const { payload } = await jwtVerify(token, key, {
        algorithms: [SIGNING_ALG],
        audience: AGENT_AUDIENCE,
        issuer: TOKEN_ISSUER,
        requiredClaims: ['exp', 'iat', 'sub'],
        currentDate: new Date(exp * 1000 - 1000),
        clockTolerance: this.clockToleranceSeconds,
      });
      return claimsOf(payload);
    } catch (err) {
      if (err instanceof AgentTokenError) throw err;
      throw new AgentTokenError('invalid');
    }
  }

  /** The key named by the header's kid; never "try every key", so a kid cannot be skipped. */
  private async keyFor(token: string, nowMs: number): Promise<CryptoKey> {
    let header: JWTHeaderParameters;
    try {
      header = decodeProtectedHeader(token) as JWTHeaderParameters;
    } catch {
      throw new AgentTokenError('invalid');
    }
    if (header.alg !== SIGNING_ALG || typeof header.kid !== 'string' || header.kid === '') {
      throw new AgentTokenError('invalid');
    }
    let key = this.keys.verificationKey(header.kid, nowMs);
    if (!key && this.keys.refresh && (await this.keys.refresh())) {
      // Another process may have rotated: the new kid is on disk but not yet in memory.
      key = this.keys.verificationKey(header.kid, nowMs);
    }
    if (!key) throw new AgentTokenError('invalid');
    return key;
  }
}

export type AgentTokenIssuerOptions = AgentTokenVerifierOptions;

/**
 * Mints, verifies and renews per-attempt agent tokens. Signs with the keyring's current key and
 * stamps its kid; verifies by the kid in the token header, so tokens from a just-retired key keep
 * working through a rotation.
 */
export class AgentTokenIssuer implements AgentTokenVerification {
  private readonly keys: SigningKeyring;
  private readonly verifier: AgentTokenVerifier;

  /**
   * @param keys the agent keyring (a bare SigningKey is accepted for older callers; it cannot
   *   rotate)
   * @param ttlSeconds the per-attempt TTL, agentTokenTtlSeconds(heartbeatSeconds) from @leoflow/core
   */
  constructor(
    keys: SigningKeyring | SigningKey,
    readonly ttlSeconds: number,
    opts: AgentTokenIssuerOptions = {},
  ) {
    if (!Number.isFinite(ttlSeconds) || ttlSeconds <= 0) {
      throw new RangeError(`agent token TTL must be positive, got ${String(ttlSeconds)}`);
    }
    if ('current' in keys) {
      this.keys = keys;
    } else if ('privateKey' in keys && keys.privateKey) {
      this.keys = singleKeyRing('agent', keys);
    } else {
      // e.g. a VerifyOnlyKeyring: it has no private key and must stay unable to mint.
      throw new TypeError(
        'AgentTokenIssuer needs a signing key; use AgentTokenVerifier to verify only',
      );
    }
    if (this.keys.purpose !== 'agent') {
      // A user-purpose ring here would let one key sign both audiences.
      throw new RangeError(`agent tokens need the agent keyring, got the ${this.keys.purpose} one`);
    }
    this.verifier = new AgentTokenVerifier(this.keys, opts);
  }

  get clockToleranceSeconds(): number {
    return this.verifier.clockToleranceSeconds;
  }

  /**
   * The compact EdDSA JWS of an attempt's claims. Signed with node:crypto's one-shot Ed25519 on
   * the key's KeyObject (synchronous, a few tens of µs) rather than jose's SignJWT (a WebCrypto
   * job per signature, several times that): every heartbeat of a live attempt re-mints, so at
   * thousands of attempts this was the heartbeat's largest cost (issue 38). The bytes are what
   * SignJWT produced (same header and claim order, and Ed25519 is deterministic); a test holds
   * the two equal, and verification is still jose's.
   */
  mint(identity: AttemptIdentity, nowMs: number, oiatSeconds?: number): Promise<string> {
    const iat = Math.floor(nowMs / 1000);
    // Synchronous underneath; a failure (no current key) still reaches the caller as a rejection.
    try {
      const key = this.keys.current();
      return Promise.resolve(
        signCompactJws(
          { alg: SIGNING_ALG, kid: key.kid, typ: 'JWT' },
          {
            ...attemptClaims(identity, iat, oiatSeconds),
            iss: TOKEN_ISSUER,
            aud: AGENT_AUDIENCE,
            sub: attemptSubject(identity),
            iat,
            exp: iat + this.ttlSeconds,
          },
          key.privateKey,
        ),
      );
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  /** jose's SignJWT over the same claims: the reference the fast mint is tested against. */
  async mintWithJose(
    identity: AttemptIdentity,
    nowMs: number,
    oiatSeconds?: number,
  ): Promise<string> {
    const iat = Math.floor(nowMs / 1000);
    const key = this.keys.current();
    return new SignJWT(attemptClaims(identity, iat, oiatSeconds))
      .setProtectedHeader({ alg: SIGNING_ALG, kid: key.kid, typ: 'JWT' })
      .setIssuer(TOKEN_ISSUER)
      .setAudience(AGENT_AUDIENCE)
      .setSubject(attemptSubject(identity))
      .setIssuedAt(iat)
      .setExpirationTime(iat + this.ttlSeconds)
      .sign(key.privateKey);
  }

  verify(token: string, nowMs: number): Promise<AgentTokenClaims> {
    return this.verifier.verify(token, nowMs);
  }

  verifyIgnoringExpiry(token: string, nowMs: number): Promise<AgentTokenClaims> {
    return this.verifier.verifyIgnoringExpiry(token, nowMs);
  }

  /**
   * Re-mints a live attempt's credential: exp = now + TTL (never the old exp + TTL), same
   * identity, same oiat. Past the ceiling — measured from oiat, ≤ 0 disables — renewal quietly
   * stops and the current token simply runs out; the task itself is never stopped by this.
   * `claims` must come from a verified token.
   */
  async renew(claims: AgentTokenClaims, nowMs: number, ceilingMs: number): Promise<RenewResult> {
    if (this.renewalExp(claims, nowMs, ceilingMs) === null) return { stopped: 'ceiling' };
    const token = await this.mint(claims, nowMs, claims.oiat);
    const iat = Math.floor(nowMs / 1000);
    return {
      token,
      // exactly what claimsOf() reads back from the token just signed
      claims: {
        tenant_id: claims.tenant_id,
        dag_id: claims.dag_id,
        dag_run_id: claims.dag_run_id,
        run_id: claims.run_id,
        task_id: claims.task_id,
        map_index: claims.map_index >= 0 ? claims.map_index : -1,
        try_number: claims.try_number,
        task_instance_id: claims.task_instance_id,
        dispatch_gen: claims.dispatch_gen ?? 0,
        iat,
        exp: iat + this.ttlSeconds,
        oiat: claims.oiat,
      },
    };
  }

  /**
   * The exp (seconds) a renewal at `nowMs` would carry, or null past the lifetime ceiling: what
   * renew() will mint, known before signing anything.
   */
  renewalExp(claims: AgentTokenClaims, nowMs: number, ceilingMs: number): number | null {
    if (ceilingMs > 0 && nowMs - claims.oiat * 1000 > ceilingMs) return null;
    return Math.floor(nowMs / 1000) + this.ttlSeconds;
  }
}

/** The KeyObject of each private CryptoKey, made once (the keyring keeps the CryptoKey). */
const keyObjects = new WeakMap<CryptoKey, KeyObject>();

/** A compact JWS, `b64url(header).b64url(payload).b64url(Ed25519 signature)`. */
function signCompactJws(
  header: Record<string, unknown>,
  payload: Record<string, unknown>,
  privateKey: CryptoKey,
): string {
  let keyObject = keyObjects.get(privateKey);
  if (!keyObject) {
    keyObject = KeyObject.from(privateKey);
    keyObjects.set(privateKey, keyObject);
  }
  const input = `${Buffer.from(JSON.stringify(header)).toString('base64url')}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}`;
  return `${input}.${signDetached(null, Buffer.from(input), keyObject).toString('base64url')}`;
}

/** The unverified exp of a compact JWS (only used to choose a verification instant). */
function expOf(token: string): number | undefined {
  const part = token.split('.')[1];
  if (!part) return undefined;
  try {
    const p = JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as { exp?: unknown };
    return typeof p.exp === 'number' && Number.isFinite(p.exp) ? p.exp : undefined;
  } catch {
    return undefined;
  }
}

function attemptSubject(identity: AttemptIdentity): string {
  return `attempt:${identity.task_instance_id}:${identity.try_number}`;
}

function claimsOf(p: Record<string, unknown>): AgentTokenClaims {
  if (
    typeof p.tid !== 'string' ||
    typeof p.dag !== 'string' ||
    typeof p.drid !== 'string' ||
    typeof p.run !== 'string' ||
    typeof p.task !== 'string' ||
    typeof p.try !== 'number' ||
    !Number.isInteger(p.try) ||
    typeof p.ti !== 'string' ||
    typeof p.oiat !== 'number' ||
    (p.gen !== undefined && (typeof p.gen !== 'number' || !Number.isInteger(p.gen) || p.gen < 0)) ||
    (p.mi !== undefined && (typeof p.mi !== 'number' || !Number.isInteger(p.mi) || p.mi < 0)) ||
    typeof p.exp !== 'number' ||
    typeof p.iat !== 'number'
  ) {
    throw new AgentTokenError('invalid');
  }
  const claims: AgentTokenClaims = {
    tenant_id: p.tid,
    dag_id: p.dag,
    dag_run_id: p.drid,
    run_id: p.run,
    task_id: p.task,
    map_index: typeof p.mi === 'number' ? p.mi : -1,
    try_number: p.try,
    task_instance_id: p.ti,
    dispatch_gen: typeof p.gen === 'number' ? p.gen : 0,
    iat: p.iat,
    exp: p.exp,
    oiat: p.oiat,
  };
  // sub is redundant with ti/try; a mismatch means the token was not minted by this code.
  if (p.sub !== attemptSubject(claims)) throw new AgentTokenError('invalid');
  return claims;
}

/** Tokens are never logged; a short fingerprint is enough to correlate. */
export function tokenFingerprint(token: string): string {
  return createHash('sha256').update(token).digest('hex').slice(0, 12);
}

/** An attempt token's own claims, in the order both mints write them (the bytes are compared). */
function attemptClaims(identity: AttemptIdentity, iat: number, oiatSeconds: number | undefined) {
  return {
    tid: identity.tenant_id,
    dag: identity.dag_id,
    drid: identity.dag_run_id,
    run: identity.run_id,
    task: identity.task_id,
    ...(identity.map_index !== undefined && identity.map_index >= 0
      ? { mi: identity.map_index }
      : {}),
    try: identity.try_number,
    ti: identity.task_instance_id,
    gen: identity.dispatch_gen ?? 0,
    oiat: oiatSeconds ?? iat,
  };
}
