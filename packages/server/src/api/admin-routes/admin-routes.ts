import type { FastifyInstance } from 'fastify';

import { AdminRouteDeps } from './admin-shared.js';
import { registerIdentityRoutes } from './identity-routes.js';
import { registerAuditRoutes } from './audit-routes.js';
import { registerTokenRoutes } from './token-routes.js';
import { registerTenantRoutes } from './tenant-routes.js';
import { registerKeyRotationRoutes } from './key-rotation-routes.js';
import { registerDoctorRoutes } from './doctor-routes.js';

export function registerAdminRoutes(app: FastifyInstance, deps: AdminRouteDeps): void {
  registerIdentityRoutes(app, deps);
  registerAuditRoutes(app);
  registerTokenRoutes(app, deps);
  registerTenantRoutes(app, deps);
  registerKeyRotationRoutes(app, deps);
  registerDoctorRoutes(app, deps);
}
