// The runner path for the door benchmarks, in this process: a real door on a real SQLite
// directory, a real cell endpoint (per-connection secrets, door credential) and the cell's
// session server (HTTP/2 over each session into the agent service behind the agent port's gate),
// plus the same service on a direct agent port. The agent service is the real request handler
// with a minimal implementation (Heartbeat, AwaitAssignment/AckAssignment through the real
// broker): what is measured is the path, not the store.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { insertBenchRunner } from './door-runner.mjs';
import { REPO, tempDir } from './lib.mjs';

const dist = (p) => pathToFileURL(join(REPO, 'packages/server/dist', p)).href;

export const BEARER = 'bench-attempt-token';

export async function startDoorStack() {
  const { openDirectory } = await import(dist('store/kysely-directory.js'));
  const { createDoor, listenDoor } = await import(dist('door/door.js'));
  const { httpCellClient } = await import(dist('door/cell-client.js'));
  const { DoorCredentialIssuer, DoorCredentialVerifier } = await import(
    dist('door/door-credential.js')
  );
  const { loadSigningKeyring } = await import(dist('auth/signing-keys.js'));
  const { startCellDoorEndpoint } = await import(dist('cells/cell-door-endpoint.js'));
  const { ConnectionSecrets } = await import(dist('cells/connection-secrets.js'));
  const { RunnerSessions } = await import(dist('cells/runner-sessions.js'));
  const { createCellSessionServer } = await import(dist('cells/cell-session.js'));
  const { createAgentAuthentication } = await import(dist('rpc/agent-auth.js'));
  const { startAgentRpcServer } = await import(dist('rpc/agent-server.js'));
  const { AssignmentBroker } = await import(dist('assignments/assignment-broker.js'));
  const { createAssignmentHandlers } = await import(dist('assignments/assignment-rpc.js'));
  const { mintRunnerToken, runnerTokenHash } = await import(dist('runners/runner-token.js'));
  const { create } = await import('@bufbuild/protobuf');
  const { HeartbeatResponseSchema } = await import('@leoflow/protocol');
  const { pino } = await import('pino');

  const data = tempDir('leoflow-bench-door-stack-');
  mkdirSync(join(data.dir, 'keys'), { recursive: true });
  const clock = { now: () => Date.now() };
  const logger = pino({ level: 'warn' });
  const directory = await openDirectory({ kind: 'sqlite', file: join(data.dir, 'directory.db') });
  await directory.migrate();
  const doorKeys = await loadSigningKeyring(join(data.dir, 'keys'), 'door');

  // One attempt identity for every Heartbeat: the verifier is the gate's, not the store's.
  const claims = {
    tenant_id: 'default',
    dag_id: 'd',
    dag_run_id: 'r',
    run_id: 'run',
    task_id: 't',
    try_number: 1,
    task_instance_id: 'ti',
    dispatch_gen: 1,
    iat: 0,
    exp: Number.MAX_SAFE_INTEGER,
    oiat: 0,
  };
  const auth = createAgentAuthentication({
    verifier: {
      verify: async (token) => {
        if (token !== BEARER) throw new Error('bad token');
        return claims;
      },
    },
    clock,
    // The door's cost is measured, not the session binding: every key is the bound one here.
    sessions: { check: async () => 'bound', refused: async () => undefined },
  });
  const broker = new AssignmentBroker(clock);
  const impl = {
    heartbeat: (req) => create(HeartbeatResponseSchema, { serverTimeMs: req.sentAtMs }),
    ...createAssignmentHandlers({
      broker,
      runnerById: async () => ({ tenant_id: 'default', labels: {}, capacity: 1 }),
      store: { getAttemptFence: async () => undefined },
      clock,
      keepaliveMs: 15_000,
    }),
  };
  const direct = await startAgentRpcServer({ impl, host: '127.0.0.1', port: 0, auth });
  const sessionServer = createCellSessionServer({ impl, auth });
  const sessions = new RunnerSessions();
  const endpoint = await startCellDoorEndpoint({
    host: '127.0.0.1',
    port: 0,
    verifier: new DoorCredentialVerifier(doorKeys, clock),
    runners: directory,
    secrets: new ConnectionSecrets(clock),
    sessions,
    logger,
    onSession: (grant, ws) => sessionServer.accept(grant, ws),
  });
  const door = createDoor({
    directory,
    topology: { kind: 'lite', url: endpoint.url },
    cells: httpCellClient(new DoorCredentialIssuer(doorKeys, clock), 5_000),
    clock,
    logger,
    bundleFile: null,
    throttle: { limit: Number.MAX_SAFE_INTEGER, windowMs: 60_000 },
  });
  const doorPort = await listenDoor(door, '127.0.0.1', 0);
  const token = mintRunnerToken();
  await insertBenchRunner(directory, token, runnerTokenHash);
  return {
    directUrl: `http://127.0.0.1:${direct.port}`,
    sessionUrl: `ws://127.0.0.1:${doorPort}/runners/${token}/session`,
    cellSessions: () => sessionServer.sessions,
    workers: () => broker.workers,
    async close() {
      sessionServer.close();
      await door.close();
      await endpoint.close();
      await direct.close();
      await directory.close();
    },
  };
}
