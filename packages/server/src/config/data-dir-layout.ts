/** Standalone's first-start admin token, in the data directory (mode 0600). */
export const ADMIN_TOKEN_FILE = 'admin.token';
