import type { Logger } from 'pino';
import type { ApiTokens } from '../../auth/api-tokens.js';
import type { TenantScopes } from '../tenancy/tenant-scope.js';
import type { UiDeps } from './guard.js';

/** What the web app's own endpoints (sign-in, sign-out, the live stream) are built from. */
export interface UiRouteDeps {
  ui: UiDeps;
  tokens: ApiTokens;
  scopes: TenantScopes;
  logger: Logger;
}
