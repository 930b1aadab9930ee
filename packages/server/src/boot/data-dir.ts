import { chmodSync, mkdirSync } from 'node:fs';

/** The data directory exists and is the owner's alone (keys, the admin token, the database). */
export function prepareDataDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  // The data directory holds signing keys, the admin token and the database: owner only.
  chmodSync(dir, 0o700);
}
