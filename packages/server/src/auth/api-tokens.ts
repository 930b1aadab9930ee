import { randomUUID } from 'node:crypto';
import { isRoleName, ROLE_NAMES, type Clock, AuthError } from '@leoflow/core';
import type { ApiTokenStore } from '../store/ports/api-tokens.js';
import type { TenantStore } from '../store/ports/tenants.js';
import type { ApiTokenRow } from '../store/types.js';
import type { UserPrincipal, UserTokenIssuer } from './user-token.js';
import { VerifiedUserTokens } from './verified-user-tokens.js';

export interface CreateTokenInput {
  tenant_id: string;
  role: string;
  /** shown in lists and audit; defaults to token-<first 8 of the jti> */
  name?: string;
  ttlSeconds?: number;
  created_by: string;
}

const NAME = /^[A-Za-z0-9_.@:-]{1,100}$/;

/**
 * User API tokens: minted once (the caller shows the token a single time), remembered by jti,
 * refused as soon as the jti is revoked. A token only authenticates when its signature, audience,
 * algorithm and expiry verify AND its jti is on record, unrevoked, for the same tenant and role.
 */
export class ApiTokens {
  private readonly verified = new VerifiedUserTokens();

  constructor(
    private readonly store: TenantStore & ApiTokenStore,
    private readonly issuer: UserTokenIssuer,
    private readonly clock: Clock,
  ) {}

  async create(input: CreateTokenInput): Promise<{ token: string; row: ApiTokenRow }> {
    if (!isRoleName(input.role)) {
      throw new AuthError(
        'LF_ROLE_UNKNOWN',
        `unknown role "${input.role}"; use one of ${ROLE_NAMES.join(', ')} (see \`leoflow auth roles\`)`,
      );
    }
    if (input.name !== undefined && !NAME.test(input.name)) {
      throw new AuthError(
        'LF_TOKEN_NAME_INVALID',
        'a token name is 1-100 of letters, digits and _ . @ : -',
      );
    }
    if (input.ttlSeconds !== undefined && !(input.ttlSeconds > 0)) {
      throw new AuthError('LF_TOKEN_TTL_INVALID', 'a token TTL must be positive (e.g. 30d, 12h)');
    }
    if (!(await this.store.getTenant(input.tenant_id))) {
      throw new AuthError(
        'LF_TENANT_NOT_FOUND',
        `no tenant "${input.tenant_id}"; create it with \`leoflow tenants create ${input.tenant_id}\``,
      );
    }
    const now = this.clock.now();
    const jti = randomUUID();
    const name = input.name ?? `token-${jti.slice(0, 8)}`;
    // The subject is the token's name, so audit entries say which token acted.
    const minted = await this.issuer.mint(
      { subject: name, tenant_id: input.tenant_id, role: input.role, jti },
      now,
      input.ttlSeconds,
    );
    const row: ApiTokenRow = {
      jti,
      tenant_id: input.tenant_id,
      name,
      role: input.role,
      created_by: input.created_by,
      created_at: now,
      expires_at: minted.expires_at,
      revoked_at: null,
      revoked_by: null,
    };
    await this.store.insertApiToken(row);
    return { token: minted.token, row };
  }

  async authenticate(token: string): Promise<UserPrincipal | null> {
    const now = this.clock.now();
    const key = VerifiedUserTokens.keyOf(token);
    let principal: UserPrincipal | null | undefined = this.verified.get(key, now);
    if (!principal) {
      const v = await this.issuer.verifyWithExpiry(token, now);
      if (!v) return null;
      principal = v.principal;
      this.verified.set(key, principal, v.expiresAtMs, now);
    }
    const row = await this.store.getApiToken(principal.jti);
    if (
      !row ||
      row.revoked_at !== null ||
      row.tenant_id !== principal.tenant_id ||
      row.role !== principal.role
    ) {
      return null;
    }
    return principal;
  }

  /** The token's own expiry (epoch ms; null when it has none or does not verify). */
  async expiryOf(token: string): Promise<number | null> {
    return (await this.issuer.verifyWithExpiry(token, this.clock.now()))?.expiresAtMs ?? null;
  }

  /**
   * A principal whose token authenticated earlier (a web app session, which keeps the jti and
   * never the token): it still acts only while the token's record is there, unrevoked,
   * unexpired, for the same tenant and role.
   */
  async stillOnRecord(principal: UserPrincipal): Promise<UserPrincipal | null> {
    const row = await this.store.getApiToken(principal.jti);
    if (
      !row ||
      row.revoked_at !== null ||
      (row.expires_at !== null && this.clock.now() >= row.expires_at) ||
      row.tenant_id !== principal.tenant_id ||
      row.role !== principal.role
    ) {
      return null;
    }
    return principal;
  }

  /**
   * Puts a token minted outside create() on record (standalone's first-start admin token, and
   * one written by a version that kept no records), so it authenticates and can be revoked.
   * A token that does not verify, or whose jti was revoked, is left alone.
   */
  async adopt(token: string, name: string): Promise<boolean> {
    const principal = await this.issuer.verify(token, this.clock.now());
    if (!principal) return false;
    if (await this.store.getApiToken(principal.jti)) return true;
    await this.store.insertApiToken({
      jti: principal.jti,
      tenant_id: principal.tenant_id,
      name,
      role: principal.role,
      created_by: 'system:bootstrap',
      created_at: this.clock.now(),
      expires_at: null,
      revoked_at: null,
      revoked_by: null,
    });
    return true;
  }
}
