/**
 * Authorization vocabulary: a permission is `<resource>:<verb>`; a role is a named set of them.
 * Pure data so that the server, the CLI and the docs all read one list.
 */
export const PERMISSIONS = [
  'dags:read',
  'dags:push',
  'dags:pause',
  'runs:read',
  'runs:trigger',
  'runs:clear',
  'runs:mark',
  'logs:read',
  'xcom:read',
  'variables:read',
  'variables:write',
  'variables:reveal',
  'variables:grant',
  'connections:read',
  'connections:write',
  'connections:test',
  'connections:reveal',
  'connections:grant',
  'credentials:revoke',
  'audit:read',
  'tokens:read',
  'tokens:create',
  'tokens:revoke',
  'runners:read',
  'runners:create',
  'runners:delete',
  'secrets:rotate-key',
  'signing-keys:rotate',
  'doctor:read',
  'tenants:admin',
] as const;

export type Permission = (typeof PERMISSIONS)[number];

/**
 * Permissions whose effect reaches past one tenant (the vault keyring and the signing keys are
 * shared by every tenant; tenants:admin creates tenants and mints tokens for them; doctor:read
 * shows the installation's configuration, paths and posture). A role grants
 * them only to principals of the platform tenant — an admin of team B is not an admin of team A.
 */
export const PLATFORM_PERMISSIONS: ReadonlySet<Permission> = new Set<Permission>([
  'secrets:rotate-key',
  'signing-keys:rotate',
  'doctor:read',
  'tenants:admin',
]);

const VIEWER: readonly Permission[] = [
  'dags:read',
  'runs:read',
  'logs:read',
  'xcom:read',
  'variables:read',
  'connections:read',
  'runners:read',
];

const DEVELOPER: readonly Permission[] = [
  ...VIEWER,
  'dags:push',
  'runs:trigger',
  'runs:clear',
  'variables:write',
  'connections:write',
  'connections:test',
];

const OPERATOR: readonly Permission[] = [
  ...DEVELOPER,
  'dags:pause',
  // marking stops a live attempt and revokes its credential: as strong as credentials:revoke
  'runs:mark',
  'credentials:revoke',
  'audit:read',
  'tokens:read',
  'runners:create',
  'runners:delete',
];

export const BUILT_IN_ROLES = {
  admin: PERMISSIONS,
  operator: OPERATOR,
  developer: DEVELOPER,
  viewer: VIEWER,
} as const satisfies Record<string, readonly Permission[]>;

export type RoleName = keyof typeof BUILT_IN_ROLES;

export const ROLE_NAMES = Object.keys(BUILT_IN_ROLES) as RoleName[];

export const ROLE_DESCRIPTIONS: Record<RoleName, string> = {
  admin:
    'everything in the tenant; in the platform tenant also tenants, keys and cross-tenant tokens',
  operator:
    'developer + pause DAGs, mark tasks and runs success or failed, revoke attempt credentials, read the audit log and tokens',
  developer: 'viewer + push DAGs, trigger and clear runs, write Variables and Connections',
  viewer: 'read-only: DAGs, runs, logs, XCom, masked Variables and Connections',
};

export function isRoleName(role: string): role is RoleName {
  return Object.prototype.hasOwnProperty.call(BUILT_IN_ROLES, role);
}

export function isPermission(p: string): p is Permission {
  return (PERMISSIONS as readonly string[]).includes(p);
}

export function rolePermissions(role: string): readonly Permission[] {
  return isRoleName(role) ? BUILT_IN_ROLES[role] : [];
}

export interface AuthorizationSubject {
  role: string;
  tenant_id: string;
}

/**
 * The one decision: does this principal hold this permission? An unknown role holds nothing
 * (fail closed), and platform permissions need the platform tenant as well as the role.
 */
export function isAllowed(
  subject: AuthorizationSubject,
  permission: Permission,
  platformTenantId: string,
): boolean {
  if (!rolePermissions(subject.role).includes(permission)) return false;
  if (PLATFORM_PERMISSIONS.has(permission)) return subject.tenant_id === platformTenantId;
  return true;
}

/** Roles that would allow it (for an error message that says which token to ask for). */
export function rolesAllowing(permission: Permission): RoleName[] {
  return ROLE_NAMES.filter((r) => BUILT_IN_ROLES[r].includes(permission));
}
