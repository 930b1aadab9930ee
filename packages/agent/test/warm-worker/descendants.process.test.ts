import { spawn } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { descendantsOf, killDescendants } from '../../src/warm-worker/descendants.js';
import { pidGone, waitFor } from '../support/spawn-agent.js';

const started: number[] = [];
afterEach(() => {
  for (const pid of started.splice(0)) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
});

describe('warm worker: the descendant sweep (the non-root path)', () => {
  it('finds children and grandchildren under a root pid, kills them all, and touches nothing else', async () => {
    // a stand-in for the worker: a shell with a child, a grandchild and a process group of its own
    const root = spawn('bash', ['-c', '(sleep 300 & sleep 300 & wait) & sleep 300 & wait'], {
      detached: true,
      stdio: 'ignore',
    });
    const bystander = spawn('sleep', ['300'], { detached: true, stdio: 'ignore' });
    started.push(root.pid!, bystander.pid!);
    const rootExit = new Promise<NodeJS.Signals | null>((r) =>
      root.once('exit', (_c, sig) => r(sig)),
    );
    await waitFor(() => descendantsOf(root.pid!).length >= 4, 5_000, 'the tree');
    const tree = descendantsOf(root.pid!);
    expect(tree).not.toContain(bystander.pid);

    expect(await killDescendants(root.pid)).toEqual([]);
    for (const pid of tree) expect(pidGone(pid)).toBe(true);
    // the root itself is never signalled: its shell ends on its own once its children are gone
    expect(await rootExit).toBeNull();
    expect(pidGone(bystander.pid!)).toBe(false);
  });
});
