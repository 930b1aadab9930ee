import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import type { AttemptIdentity } from '../../src/auth/agent-token.js';

/** 2026-08-20T12:00:00Z, the reference fixture clock. */
export const T0 = Date.UTC(2026, 7, 20, 12, 0, 0);
export const MIN = 60_000;
export const HOUR = 60 * MIN;

export const identity: AttemptIdentity = {
  tenant_id: 'acme',
  dag_id: 'etl',
  dag_run_id: 'dr-1',
  run_id: 'run-1',
  task_id: 'extract',
  try_number: 1,
  task_instance_id: 'ti-1',
};

/** A fresh data directory per test, removed afterwards. */
export function useTempDirs(): () => string {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  return () => {
    const d = mkdtempSync(join(tmpdir(), 'leoflow-keys-'));
    dirs.push(d);
    return d;
  };
}
