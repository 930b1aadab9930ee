import { randomUUID } from 'node:crypto';
import { decodeProtectedHeader, jwtVerify, SignJWT, type CryptoKey } from 'jose';
import {
  SIGNING_ALG,
  singleKeyRing,
  type SigningKey,
  type SigningKeyring,
} from './signing-keys.js';
import { TOKEN_ISSUER } from './agent-token.js';

export const USER_AUDIENCE = 'leoflow-user';

export interface UserPrincipal {
  subject: string;
  tenant_id: string;
  role: string;
  jti: string;
}

export interface MintedUserToken {
  token: string;
  jti: string;
  /** epoch ms, or null for a token without expiry */
  expires_at: number | null;
}

/**
 * Signs and verifies API tokens for people and scripts: their own keyring and audience, never
 * the agent's. Verification picks the key named by the header's kid (a rotated-out key keeps
 * verifying the tokens it signed) and accepts exactly one algorithm — `alg: none`, HMAC with a
 * public key as secret, and every other algorithm are refused before any signature check.
 * Revocation is not decided here: a verified token still has to be found unrevoked by jti.
 */
export class UserTokenIssuer {
  private readonly keys: SigningKeyring;

  constructor(keys: SigningKeyring | SigningKey) {
    this.keys = 'current' in keys ? keys : singleKeyRing('user', keys);
    if (this.keys.purpose !== 'user') {
      throw new RangeError(`user tokens need the user keyring, got the ${this.keys.purpose} one`);
    }
  }

  async mint(
    p: Omit<UserPrincipal, 'jti'> & { jti?: string },
    nowMs: number,
    ttlSeconds?: number,
  ): Promise<MintedUserToken> {
    const iat = Math.floor(nowMs / 1000);
    const key = this.keys.current();
    const jti = p.jti ?? randomUUID();
    const jwt = new SignJWT({ tid: p.tenant_id, role: p.role })
      .setProtectedHeader({ alg: SIGNING_ALG, kid: key.kid, typ: 'JWT' })
      .setIssuer(TOKEN_ISSUER)
      .setAudience(USER_AUDIENCE)
      .setSubject(p.subject)
      .setJti(jti)
      .setIssuedAt(iat);
    if (ttlSeconds !== undefined) jwt.setExpirationTime(iat + ttlSeconds);
    return {
      token: await jwt.sign(key.privateKey),
      jti,
      expires_at: ttlSeconds === undefined ? null : (iat + ttlSeconds) * 1000,
    };
  }

  async verify(token: string, nowMs: number): Promise<UserPrincipal | null> {
    return (await this.verifyWithExpiry(token, nowMs))?.principal ?? null;
  }

  /** As verify, plus the token's own expiry (epoch ms; null when it has none). */
  async verifyWithExpiry(
    token: string,
    nowMs: number,
  ): Promise<{ principal: UserPrincipal; expiresAtMs: number | null } | null> {
    try {
      const key = await this.keyFor(token);
      if (!key) return null;
      const { payload } = await jwtVerify(token, key, {
        algorithms: [SIGNING_ALG],
        audience: USER_AUDIENCE,
        issuer: TOKEN_ISSUER,
        currentDate: new Date(nowMs),
      });
      const p = payload as Record<string, unknown>;
      if (
        typeof p.sub !== 'string' ||
        typeof p.tid !== 'string' ||
        typeof p.role !== 'string' ||
        typeof p.jti !== 'string' ||
        p.jti === ''
      )
        return null;
      return {
        principal: { subject: p.sub, tenant_id: p.tid, role: p.role, jti: p.jti },
        expiresAtMs: typeof p.exp === 'number' ? p.exp * 1000 : null,
      };
    } catch {
      return null;
    }
  }

  private async keyFor(token: string): Promise<CryptoKey | undefined> {
    const header = decodeProtectedHeader(token);
    if (header.alg !== SIGNING_ALG || typeof header.kid !== 'string' || header.kid === '') {
      return undefined;
    }
    let key = this.keys.verificationKey(header.kid);
    if (!key && this.keys.refresh && (await this.keys.refresh())) {
      key = this.keys.verificationKey(header.kid);
    }
    return key;
  }
}
