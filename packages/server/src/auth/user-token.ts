import { randomUUID } from 'node:crypto';
import { jwtVerify, SignJWT } from 'jose';
import { SIGNING_ALG, type SigningKey } from './signing-keys.js';
import { TOKEN_ISSUER } from './agent-token.js';

export const USER_AUDIENCE = 'leoflow-user';

export interface UserPrincipal {
  subject: string;
  tenant_id: string;
  role: string;
  jti: string;
}

/** API tokens for people and scripts; a separate key and audience from agent tokens. */
export class UserTokenIssuer {
  constructor(private readonly key: SigningKey) {}

  async mint(p: Omit<UserPrincipal, 'jti'>, nowMs: number, ttlSeconds?: number): Promise<string> {
    const iat = Math.floor(nowMs / 1000);
    const jwt = new SignJWT({ tid: p.tenant_id, role: p.role })
      .setProtectedHeader({ alg: SIGNING_ALG, kid: this.key.kid, typ: 'JWT' })
      .setIssuer(TOKEN_ISSUER)
      .setAudience(USER_AUDIENCE)
      .setSubject(p.subject)
      .setJti(randomUUID())
      .setIssuedAt(iat);
    if (ttlSeconds !== undefined) jwt.setExpirationTime(iat + ttlSeconds);
    return jwt.sign(this.key.privateKey);
  }

  async verify(token: string, nowMs: number): Promise<UserPrincipal | null> {
    try {
      const { payload } = await jwtVerify(token, this.key.publicKey, {
        algorithms: [SIGNING_ALG],
        audience: USER_AUDIENCE,
        issuer: TOKEN_ISSUER,
        currentDate: new Date(nowMs),
      });
      const p = payload as Record<string, unknown>;
      if (typeof p.sub !== 'string' || typeof p.tid !== 'string' || typeof p.role !== 'string')
        return null;
      return {
        subject: p.sub,
        tenant_id: p.tid,
        role: p.role,
        jti: typeof p.jti === 'string' ? p.jti : '',
      };
    } catch {
      return null;
    }
  }
}
