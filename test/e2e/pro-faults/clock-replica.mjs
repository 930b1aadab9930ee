// A `leoflow server` replica whose wall clock (the control plane's clock port, @leoflow/core's
// Clock) the test moves: the same command as the CLI's, with a clock whose now() is Date.now() +
// an offset (its monotonic reading is performance.now: only the wall clock jumps)
// passed to startControlPlane. The parent (spawned with an IPC channel, test/support/pro-cluster.ts
// `entry`) sends { jumpMs } to move it; the replica answers { offsetMs }. Only this process's idea
// of the time moves: the lease is kept on the database's clock and the elector's deadline on the
// monotonic clock, which is what the clock-jump case checks.
import { Command } from 'commander';
import { registerServer } from '../../../packages/cli/dist/commands/server.js';

let offsetMs = 0;
process.on('message', (m) => {
  if (m && typeof m.jumpMs === 'number') {
    offsetMs += m.jumpMs;
    process.stdout.write(`clock jumped by ${m.jumpMs} ms (offset now ${offsetMs} ms)\n`);
    process.send?.({ offsetMs });
  }
});
const program = new Command();
registerServer(program, {
  clock: { now: () => Date.now() + offsetMs, monotonicNow: () => performance.now() },
});
await program.parseAsync(['server', ...process.argv.slice(2)], { from: 'user' });
