import { createHash } from 'node:crypto';
import { errors as joseErrors, jwtVerify, SignJWT } from 'jose';
import { SIGNING_ALG, type SigningKey } from './signing-keys.js';

export const AGENT_AUDIENCE = 'leoflow-agent';
export const TOKEN_ISSUER = 'leoflow';

/** The identity one attempt's credential carries; the server trusts nothing else from the agent. */
export interface AttemptIdentity {
  tenant_id: string;
  dag_id: string;
  /** dag_runs.id (internal) */
  dag_run_id: string;
  /** the run's user-facing run_id */
  run_id: string;
  task_id: string;
  try_number: number;
  task_instance_id: string;
}

export interface AgentTokenClaims extends AttemptIdentity {
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

export class AgentTokenIssuer {
  constructor(
    private readonly key: SigningKey,
    private readonly ttlSeconds: number,
  ) {}

  async mint(identity: AttemptIdentity, nowMs: number, oiatSeconds?: number): Promise<string> {
    const iat = Math.floor(nowMs / 1000);
    return new SignJWT({
      tid: identity.tenant_id,
      dag: identity.dag_id,
      drid: identity.dag_run_id,
      run: identity.run_id,
      task: identity.task_id,
      try: identity.try_number,
      ti: identity.task_instance_id,
      oiat: oiatSeconds ?? iat,
    })
      .setProtectedHeader({ alg: SIGNING_ALG, kid: this.key.kid, typ: 'JWT' })
      .setIssuer(TOKEN_ISSUER)
      .setAudience(AGENT_AUDIENCE)
      .setSubject(`attempt:${identity.task_instance_id}:${identity.try_number}`)
      .setIssuedAt(iat)
      .setExpirationTime(iat + this.ttlSeconds)
      .sign(this.key.privateKey);
  }

  async verify(token: string, nowMs: number): Promise<AgentTokenClaims> {
    try {
      const { payload } = await jwtVerify(token, this.key.publicKey, {
        algorithms: [SIGNING_ALG],
        audience: AGENT_AUDIENCE,
        issuer: TOKEN_ISSUER,
        currentDate: new Date(nowMs),
        clockTolerance: 0,
      });
      const p = payload as Record<string, unknown>;
      if (
        typeof p.tid !== 'string' ||
        typeof p.dag !== 'string' ||
        typeof p.drid !== 'string' ||
        typeof p.run !== 'string' ||
        typeof p.task !== 'string' ||
        typeof p.try !== 'number' ||
        typeof p.ti !== 'string' ||
        typeof p.oiat !== 'number' ||
        typeof p.exp !== 'number' ||
        typeof p.iat !== 'number'
      ) {
        throw new AgentTokenError('invalid');
      }
      return {
        tenant_id: p.tid,
        dag_id: p.dag,
        dag_run_id: p.drid,
        run_id: p.run,
        task_id: p.task,
        try_number: p.try,
        task_instance_id: p.ti,
        iat: p.iat,
        exp: p.exp,
        oiat: p.oiat,
      };
    } catch (err) {
      if (err instanceof AgentTokenError) throw err;
      if (err instanceof joseErrors.JWTExpired) throw new AgentTokenError('expired');
      throw new AgentTokenError('invalid');
    }
  }
}

/** Tokens are never logged; a short fingerprint is enough to correlate. */
export function tokenFingerprint(token: string): string {
  return createHash('sha256').update(token).digest('hex').slice(0, 12);
}
