import { describe, expect, it } from 'vitest';
import {
  BUILT_IN_ROLES,
  isAllowed,
  PERMISSIONS,
  PLATFORM_PERMISSIONS,
  rolePermissions,
  ROLE_NAMES,
} from '../../src/rbac/index.js';

describe('built-in roles', () => {
  it('viewer is read-only: every permission it holds is a :read', () => {
    for (const p of BUILT_IN_ROLES.viewer) expect(p).toMatch(/:read$/);
  });

  it('each role holds everything the one below it holds (viewer ⊂ developer ⊂ operator ⊂ admin)', () => {
    const chain = ['viewer', 'developer', 'operator', 'admin'] as const;
    for (let i = 1; i < chain.length; i++) {
      const lower = new Set(BUILT_IN_ROLES[chain[i - 1]!]);
      const upper = new Set(BUILT_IN_ROLES[chain[i]!]);
      for (const p of lower) expect(upper.has(p), `${chain[i]} lacks ${p}`).toBe(true);
      expect(upper.size).toBeGreaterThan(lower.size);
    }
  });

  it('admin holds every permission; only admin can reveal secrets or mint tokens', () => {
    expect(new Set(BUILT_IN_ROLES.admin)).toEqual(new Set(PERMISSIONS));
    for (const p of ['variables:reveal', 'connections:reveal', 'tokens:create'] as const) {
      expect(ROLE_NAMES.filter((r) => rolePermissions(r).includes(p))).toEqual(['admin']);
    }
  });

  it('an unknown role holds nothing', () => {
    for (const p of PERMISSIONS) {
      expect(isAllowed({ role: 'superuser', tenant_id: 'default' }, p, 'default')).toBe(false);
    }
  });

  it('platform permissions need the platform tenant as well as the role', () => {
    for (const p of PLATFORM_PERMISSIONS) {
      expect(isAllowed({ role: 'admin', tenant_id: 'default' }, p, 'default')).toBe(true);
      expect(isAllowed({ role: 'admin', tenant_id: 'team-a' }, p, 'default')).toBe(false);
    }
    expect(isAllowed({ role: 'admin', tenant_id: 'team-a' }, 'tokens:create', 'default')).toBe(
      true,
    );
  });
});
