import { describe, expect, it } from 'vitest';
import { checkPermission } from '../../src/api/authz.js';

const ctx = { platformTenantId: 'default' };
const as = (role: string, tenant_id = 'team-a') => ({ subject: 's', tenant_id, role, jti: 'j' });

describe('checkPermission', () => {
  it('lets a role through for a permission it grants', () => {
    expect(() => checkPermission(as('viewer'), 'dags:read', ctx)).not.toThrow();
    expect(() => checkPermission(as('admin'), 'variables:reveal', ctx)).not.toThrow();
  });

  it('refuses with LF_FORBIDDEN naming the permission and the roles that have it', () => {
    expect(() => checkPermission(as('viewer'), 'runs:trigger', ctx)).toThrow(
      expect.objectContaining({
        code: 'LF_FORBIDDEN',
        message: expect.stringMatching(/viewer does not grant runs:trigger.*developer/),
      }),
    );
  });

  it('fails closed for unknown and differently-cased roles', () => {
    for (const role of ['', 'Admin', 'root', 'admin ']) {
      expect(() => checkPermission(as(role), 'dags:read', ctx)).toThrow(
        expect.objectContaining({ code: 'LF_FORBIDDEN' }),
      );
    }
  });

  it('gives platform permissions only to admins of the platform tenant', () => {
    expect(() => checkPermission(as('admin', 'default'), 'tenants:admin', ctx)).not.toThrow();
    expect(() => checkPermission(as('admin', 'team-a'), 'tenants:admin', ctx)).toThrow(
      expect.objectContaining({
        code: 'LF_FORBIDDEN',
        message: expect.stringContaining('platform tenant "default"'),
      }),
    );
    expect(() => checkPermission(as('operator', 'default'), 'secrets:rotate-key', ctx)).toThrow(
      expect.objectContaining({ code: 'LF_FORBIDDEN' }),
    );
  });
});
