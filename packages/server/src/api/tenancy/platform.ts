import { type Clock, AuthError } from '@leoflow/core';
import type { ApiTokens, CreateTokenInput } from '../../auth/api-tokens.js';
import type { DoctorReport } from '../../doctor/report.js';
import type { TenantStore } from '../../store/ports/tenants.js';
import type { ApiTokenRow, Page, TenantRow } from '../../store/types.js';

const TENANT_ID = /^[a-z0-9][a-z0-9-]{0,62}$/;

export interface PlatformDeps {
  store: TenantStore;
  tokens: ApiTokens;
  clock: Clock;
  rotateVaultKey: (opts: { resume: boolean; prune: boolean }) => Promise<Record<string, unknown>>;
  rotateUserSigningKey: () => Promise<{ kid: string; keys: { kid: string; signing: boolean }[] }>;
  /** the running control plane's own doctor report (redacted) */
  doctor: () => Promise<DoctorReport>;
}

/**
 * Operations whose reach is the whole installation: tenants, tokens minted for any tenant, the
 * shared vault keyring and the user signing keys. Only routes guarded by a platform permission
 * call these (see PLATFORM_PERMISSIONS in core).
 */
export class PlatformAdmin {
  constructor(private readonly deps: PlatformDeps) {}

  listTenants(page: Page): Promise<TenantRow[]> {
    return this.deps.store.listTenants(page);
  }

  async createTenant(id: string, name: string | undefined): Promise<TenantRow> {
    if (!TENANT_ID.test(id)) {
      throw new AuthError(
        'LF_TENANT_ID_INVALID',
        `tenant id "${id}" must be 1-63 of lowercase letters, digits and -, starting with a letter or digit`,
      );
    }
    const row = { id, name: name ?? id, created_at: this.deps.clock.now() };
    if (!(await this.deps.store.createTenant(row))) {
      throw new AuthError('LF_TENANT_EXISTS', `tenant "${id}" already exists`);
    }
    return row;
  }

  createToken(input: CreateTokenInput): Promise<{ token: string; row: ApiTokenRow }> {
    return this.deps.tokens.create(input);
  }

  rotateVaultKey(opts: { resume: boolean; prune: boolean }): Promise<Record<string, unknown>> {
    return this.deps.rotateVaultKey(opts);
  }

  rotateUserSigningKey(): Promise<{ kid: string; keys: { kid: string; signing: boolean }[] }> {
    return this.deps.rotateUserSigningKey();
  }

  doctorReport(): Promise<DoctorReport> {
    return this.deps.doctor();
  }
}
