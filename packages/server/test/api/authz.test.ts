import { describe, expect, it } from 'vitest';
import { requireAdmin } from '../../src/api/authz.js';

describe('requireAdmin (reveal, export, revoke, rotate)', () => {
  const as = (role: string) => ({ subject: 's', tenant_id: 'default', role, jti: 'j' });

  it('lets the admin role through', () => {
    expect(() => requireAdmin(as('admin'), 'revealing secret values')).not.toThrow();
  });

  it('refuses every other role with LF_FORBIDDEN naming the action', () => {
    for (const role of ['viewer', 'developer', 'operator', '', 'Admin']) {
      expect(() => requireAdmin(as(role), 'rotating the vault key')).toThrow(
        expect.objectContaining({
          code: 'LF_FORBIDDEN',
          message: 'rotating the vault key needs the admin role',
        }),
      );
    }
  });
});
