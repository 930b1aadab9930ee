// door_session_memory: what an idle runner session costs the door and the cell, both in this
// process, at N sessions (1,000; --quick: 100) held by one synthetic client process
// (door-session-client.mjs: a WebSocket, HTTP/2 and a waiting AwaitAssignment stream each), not
// N runner processes. Baseline: the same process with the stack up and no session, after GC.
// Reports heap and RSS per session.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { REPO, log, round, sleep } from './lib.mjs';
import { startDoorStack } from './door-stack.mjs';

export const description =
  'heap and RSS per idle runner session (door + cell endpoint + cell HTTP/2 session + waiting AwaitAssignment) at N sessions held by one synthetic client process';

const TARGET_KIB_PER_SESSION = 256;

function snapshot() {
  globalThis.gc?.();
  const m = process.memoryUsage();
  return { heap_used: m.heapUsed, rss: m.rss, external: m.external + m.arrayBuffers };
}

export async function run({ quick }) {
  const n = quick ? 100 : 1_000;
  const stack = await startDoorStack();
  await sleep(200);
  const before = snapshot();
  const client = spawn(
    process.execPath,
    [join(REPO, 'bench/door-session-client.mjs'), stack.sessionUrl, String(n)],
    { cwd: REPO, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  try {
    log(`door_session_memory: opening ${n} sessions`);
    await new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error('the synthetic client did not get ready')),
        120_000,
      );
      client.stdout.on('data', (b) => {
        if (String(b).includes('ready')) {
          clearTimeout(timer);
          resolve();
        }
      });
      client.once('exit', (c) => reject(new Error(`the synthetic client exited with ${c}`)));
    });
    // every session has its AwaitAssignment stream attached to the broker
    const deadline = Date.now() + 60_000;
    while (stack.workers() < n && Date.now() < deadline) await sleep(100);
    await sleep(500);
    const after = snapshot();
    const per = (k) => round((after[k] - before[k]) / n / 1024, 1);
    const perSession = {
      heap_kib: per('heap_used'),
      rss_kib: per('rss'),
      external_kib: per('external'),
    };
    return {
      description,
      sessions: n,
      cell_http2_sessions: stack.cellSessions(),
      waiting_streams: stack.workers(),
      gc_exposed: typeof globalThis.gc === 'function',
      baseline_mib: {
        heap_used: round(before.heap_used / 2 ** 20, 1),
        rss: round(before.rss / 2 ** 20, 1),
      },
      with_sessions_mib: {
        heap_used: round(after.heap_used / 2 ** 20, 1),
        rss: round(after.rss / 2 ** 20, 1),
      },
      per_session: perSession,
      target: { rss_kib_per_session_max: TARGET_KIB_PER_SESSION },
      meets_target: stack.workers() >= n && perSession.rss_kib <= TARGET_KIB_PER_SESSION,
    };
  } finally {
    client.kill('SIGKILL');
    await stack.close();
  }
}
