import { LeoflowError } from '@leoflow/core';
import type { UserPrincipal } from '../auth/user-token.js';

/**
 * Actions that expose or destroy secret material (reveal, export, revoke, rotate) are held back
 * to the admin role until the RBAC issue brings per-permission roles; one place decides it.
 */
export function requireAdmin(principal: UserPrincipal, action: string): void {
  if (principal.role !== 'admin') {
    throw new LeoflowError('LF_FORBIDDEN', `${action} needs the admin role`);
  }
}
