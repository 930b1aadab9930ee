import type { FastifyInstance } from 'fastify';

import { registerDagRunRoutes } from './dag-run-routes.js';
import { registerTaskInstanceRoutes } from './task-instance-routes.js';
import { registerAttemptOutputRoutes } from './attempt-output-routes.js';
import { registerRunMarkRoutes } from './mark-routes.js';
import { registerCredentialUseRoutes } from './credential-use-routes.js';

export function registerRunRoutes(api: FastifyInstance): void {
  registerDagRunRoutes(api);
  registerTaskInstanceRoutes(api);
  registerAttemptOutputRoutes(api);
  registerRunMarkRoutes(api);
  registerCredentialUseRoutes(api);
}
