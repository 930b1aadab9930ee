/**
 * A runner that stops sending (EOF) while the cell still owes it frames must not take the cell
 * down. Node's HTTP/2 over a non-socket stream asserts (an uncaught exception) when the session
 * writes while the socket's shutdown is pending, and a peer's EOF used to start that shutdown
 * (runners/cells/peer-eof-fence.ts). The cell's write side here ends slowly, as a WebSocket's close
 * handshake or an ssh channel whose far end is gone does, so the shutdown stays pending; the
 * cell then has an assignment to push onto the runner's open AwaitAssignment stream.
 */
import { createHash } from 'node:crypto';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport, Http2SessionManager } from '@connectrpc/connect-node';
import { AGENT_PROTOCOL_VERSION, AgentService } from '@leoflow/protocol';
import { Duplex, PassThrough, Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createCellSessionServer,
  type CellSessionServer,
} from '../../../src/runners/cells/cell-session.js';
import { createHarness, spec, task, type Harness } from '../../support/harness.js';

let h: Harness | undefined;
let cell: CellSessionServer | undefined;
let sessionManager: Http2SessionManager | undefined;
afterEach(async () => {
  sessionManager?.abort();
  cell?.close();
  await h?.close();
  h = cell = sessionManager = undefined;
});

async function until(what: string, cond: () => boolean, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('a runner session whose runner sends EOF', () => {
  it('is dropped by the cell at once: nothing more is written to it and the cell keeps running', async () => {
    h = await createHarness({
      runners: () => Promise.resolve({ tenant_id: 'default', labels: {}, capacity: 1 }),
    });
    cell = createCellSessionServer({ impl: h.agentService, auth: h.agentAuth });

    const runnerToCell = new PassThrough();
    const cellToRunner = new PassThrough();
    let eofSent = false;
    let bytesAfterEof = 0;
    const cellWrites = new Writable({
      write(chunk: Buffer, _enc, done) {
        if (eofSent) bytesAfterEof += chunk.length;
        cellToRunner.write(chunk, done);
      },
      // the cell's own end never completes within the test: its shutdown would stay pending
      final() {},
    });
    cell.serve(
      { runner_id: 'rnr_eof', tenant_id: 'default' },
      Duplex.from({ readable: runnerToCell, writable: cellWrites }),
    );
    expect(cell.sessions).toBe(1);

    sessionManager = new Http2SessionManager('http://runner-session', undefined, {
      createConnection: () => Duplex.from({ readable: cellToRunner, writable: runnerToCell }),
    });
    const runner = createClient(
      AgentService,
      createGrpcTransport({ baseUrl: 'http://runner-session', sessionManager }),
    );
    const waiting = runner.awaitAssignment({
      freeSlots: 1,
      protocolVersion: AGENT_PROTOCOL_VERSION,
    });
    const reading = (async () => {
      try {
        for await (const _ of waiting) {
          // keepalives and assignments alike: the runner only waits
        }
      } catch {
        // the session is torn down under it
      }
    })();
    await until('the runner to be waiting', () => h!.broker!.workers === 1);

    eofSent = true;
    runnerToCell.end();
    await until(
      'the cell to drop the session',
      () => cell!.sessions === 0 && h!.broker!.workers === 0,
    );

    // something the cell would push to a waiting runner
    const s = spec({ dag_id: 'after_eof', tasks: [task('t', { executor: 'runner' })] });
    await h.store.putDagVersion(
      'default',
      s,
      createHash('sha256').update(JSON.stringify(s)).digest('hex'),
      h.clock.now(),
    );
    const run = await h.runs.trigger('default', 'after_eof', {});
    await h.scheduler.tick();
    await new Promise((r) => setTimeout(r, 200));

    expect(bytesAfterEof).toBe(0);
    expect((await h.store.listTaskInstances(run.id))[0]!.state).toBe('queued');
    sessionManager.abort();
    await reading;
  });
});
