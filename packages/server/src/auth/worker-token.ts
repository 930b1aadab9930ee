import { errors as joseErrors, jwtVerify, SignJWT, decodeProtectedHeader } from 'jose';
import { TOKEN_ISSUER } from './agent-token.js';
import { SIGNING_ALG, type SigningKeyring } from './signing-keys.js';

/**
 * The warm-pool worker's bootstrap token (docs/kubernetes.md, "The two-token model"). Signed with
 * the agent keyring like an attempt token, but for its OWN audience and with a `scp: worker`
 * claim, so neither verifier accepts the other's tokens: an attempt token never opens a worker
 * stream, and a worker token never resolves a secret. It names a pod of a pool, no attempt.
 */
export const WORKER_AUDIENCE = 'leoflow-worker';
export const WORKER_SCOPE = 'worker';

/**
 * 10 min: long enough that a renewal pushed on the stream at two thirds of it survives a slow
 * stream, short enough that a copied token is useless soon after its pod is gone.
 */
export const WORKER_TOKEN_TTL_SECONDS = 600;

/** Who a worker token speaks for: one pod of one pool, of one tenant. */
export interface WorkerIdentity {
  /** the pool's key (executor/kubernetes warm pools: tenant + service account + image) */
  pool_key: string;
  tenant_id: string;
  /** the pod's name and uid, as the exchange reviewed them */
  pod_name: string;
  pod_uid: string;
}

export interface WorkerTokenClaims extends WorkerIdentity {
  iat: number;
  exp: number;
}

export class WorkerTokenError extends Error {
  constructor(readonly reason: 'expired' | 'invalid') {
    super(reason === 'expired' ? 'worker token expired' : 'invalid worker token');
  }
}

export interface WorkerTokenVerification {
  verify(token: string, nowMs: number): Promise<WorkerTokenClaims>;
}

/** Mints and verifies worker tokens; time comes from the caller (an injectable clock). */
export class WorkerTokenIssuer implements WorkerTokenVerification {
  constructor(
    private readonly keys: SigningKeyring,
    readonly ttlSeconds: number = WORKER_TOKEN_TTL_SECONDS,
    private readonly clockToleranceSeconds = 5,
  ) {
    if (keys.purpose !== 'agent') {
      throw new RangeError(`worker tokens need the agent keyring, got the ${keys.purpose} one`);
    }
    if (!Number.isFinite(ttlSeconds) || ttlSeconds <= 0) {
      throw new RangeError(`worker token TTL must be positive, got ${String(ttlSeconds)}`);
    }
  }

  async mint(
    identity: WorkerIdentity,
    nowMs: number,
  ): Promise<{ token: string; expiresAtMs: number }> {
    const iat = Math.floor(nowMs / 1000);
    const exp = iat + this.ttlSeconds;
    const key = this.keys.current();
    const token = await new SignJWT({
      scp: WORKER_SCOPE,
      tid: identity.tenant_id,
      pool: identity.pool_key,
      pod: identity.pod_name,
      puid: identity.pod_uid,
    })
      .setProtectedHeader({ alg: SIGNING_ALG, kid: key.kid, typ: 'JWT' })
      .setIssuer(TOKEN_ISSUER)
      .setAudience(WORKER_AUDIENCE)
      .setSubject(workerSubject(identity))
      .setIssuedAt(iat)
      .setExpirationTime(exp)
      .sign(key.privateKey);
    return { token, expiresAtMs: exp * 1000 };
  }

  async verify(token: string, nowMs: number): Promise<WorkerTokenClaims> {
    try {
      const header = decodeProtectedHeader(token);
      if (header.alg !== SIGNING_ALG || typeof header.kid !== 'string') {
        throw new WorkerTokenError('invalid');
      }
      const key = this.keys.verificationKey(header.kid, nowMs);
      if (!key) throw new WorkerTokenError('invalid');
      const { payload } = await jwtVerify(token, key, {
        algorithms: [SIGNING_ALG],
        audience: WORKER_AUDIENCE,
        issuer: TOKEN_ISSUER,
        requiredClaims: ['exp', 'iat', 'sub'],
        currentDate: new Date(nowMs),
        clockTolerance: this.clockToleranceSeconds,
      });
      return claimsOf(payload);
    } catch (err) {
      if (err instanceof WorkerTokenError) throw err;
      if (err instanceof joseErrors.JWTExpired) throw new WorkerTokenError('expired');
      throw new WorkerTokenError('invalid');
    }
  }
}

function workerSubject(id: WorkerIdentity): string {
  return `worker:${id.pool_key}:${id.pod_uid}`;
}

function claimsOf(p: Record<string, unknown>): WorkerTokenClaims {
  if (
    p.scp !== WORKER_SCOPE ||
    typeof p.tid !== 'string' ||
    typeof p.pool !== 'string' ||
    typeof p.pod !== 'string' ||
    typeof p.puid !== 'string' ||
    typeof p.exp !== 'number' ||
    typeof p.iat !== 'number'
  ) {
    throw new WorkerTokenError('invalid');
  }
  const claims: WorkerTokenClaims = {
    tenant_id: p.tid,
    pool_key: p.pool,
    pod_name: p.pod,
    pod_uid: p.puid,
    iat: p.iat,
    exp: p.exp,
  };
  if (p.sub !== workerSubject(claims)) throw new WorkerTokenError('invalid');
  return claims;
}
