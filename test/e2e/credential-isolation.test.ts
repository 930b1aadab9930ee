import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cli,
  scratchDir,
  startStandalone,
  writeDag,
  type Standalone,
} from '../support/processes.js';

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

let scratch: ReturnType<typeof scratchDir>;
let sa: Standalone;

beforeAll(async () => {
  scratch = scratchDir('leoflow-cred-');
  const dataDir = join(scratch.dir, 'data');
  // The task looks for any JWT (the agent credential and the admin token are both JWTs) in every
  // place task code could read: its env, its parent's env and argv, and the data directory.
  writeDag(
    join(scratch.dir, 'dags'),
    'snoop',
    `dag_id: snoop
tasks:
  - task_id: look
    env: { DATA_DIR: "${dataDir}", SCRATCH: "${scratch.dir}" }
    command: |
      PAT=$(printf 'e%sJ' y)  # the JWT prefix, spelled so this file does not contain it
      check() { if grep -a -q "$PAT" "$1" 2>/dev/null; then echo "LEAK in $2"; else echo "clean: $2"; fi; }
      env > "$HOME/env.txt"; check "$HOME/env.txt" "own env"
      check /proc/$PPID/environ "parent env"
      check /proc/$PPID/cmdline "parent argv"
      check /proc/self/environ "own /proc env"
      for f in "$DATA_DIR/admin.token" "$DATA_DIR/keys/agent-signing-key.json" "$DATA_DIR/leoflow.db"; do
        if cat "$f" >/dev/null 2>&1; then echo "READABLE $f"; else echo "denied: $f"; fi
      done
      if grep -r -a -l "$PAT" "$HOME" "$SCRATCH" 2>/dev/null | grep -v env.txt; then echo "LEAK in files"; else echo "clean: files"; fi
      echo "uid $(id -u)"
`,
  );
  sa = await startStandalone({ dataDir, dagsFolder: join(scratch.dir, 'dags') });
});

afterAll(async () => {
  await sa?.stop();
  scratch?.cleanup();
});

describe('task code cannot reach the credential or the control plane data', () => {
  it('finds no token in its env, its parent env or argv, or any file it can read', async () => {
    const env = { LEOFLOW_URL: sa.url, LEOFLOW_TOKEN: sa.token };
    const run = await cli(['runs', 'trigger', 'snoop', '--wait', '-o', 'json'], env);
    expect(run.code).toBe(0);
    const runId = (JSON.parse(run.stdout) as { run: { run_id: string } }).run.run_id;
    const logs = await cli(['tasks', 'logs', runId, 'look', '-o', 'json'], env);
    const lines = (JSON.parse(logs.stdout) as { lines: { message: string }[] }).lines.map(
      (l) => l.message,
    );
    expect(
      lines.filter((l) => l.startsWith('LEAK')),
      lines.join('\n'),
    ).toEqual([]);
    for (const place of ['own env', 'parent env', 'parent argv', 'own /proc env', 'files']) {
      expect(lines).toContain(`clean: ${place}`);
    }
    if (isRoot) {
      // a uid of its own, from the default execution.attempt_uid_range
      const uid = Number(lines.find((l) => l.startsWith('uid '))?.slice(4));
      expect(uid).toBeGreaterThanOrEqual(1879048192);
      expect(uid).toBeLessThanOrEqual(1879113727);
      expect(lines.filter((l) => l.startsWith('READABLE'))).toEqual([]);
    } else {
      process.stderr.write(
        'credential-isolation: not root, so tasks run as this user and the data-directory checks are not asserted (documented residual exposure)\n',
      );
    }
  });
});
