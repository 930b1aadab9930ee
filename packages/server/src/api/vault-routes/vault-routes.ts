import type { FastifyInstance } from 'fastify';

import type { VaultRouteDeps } from './vault-shared.js';
import { registerVariableRoutes } from './variable-routes.js';
import { registerConnectionRoutes } from './connection-routes.js';
import { registerVaultTransferRoutes } from './transfer-routes.js';

export function registerVaultRoutes(api: FastifyInstance, deps: VaultRouteDeps): void {
  registerVariableRoutes(api, deps);
  registerConnectionRoutes(api, deps);
  registerVaultTransferRoutes(api, deps);
}
