/**
 * The benchmarks assemble their own control plane from dist/ (bench/credential-plane.mjs). Nothing
 * else runs them, so a change to the agent port's wiring once left heartbeat_renewal and
 * secret_rpc crashing unnoticed; this smoke test builds that plane and makes one Heartbeat and one
 * GetConnections through its real server.
 */
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { AgentService, SESSION_HEADER } from '@leoflow/protocol';
import { afterAll, describe, expect, it } from 'vitest';
// @ts-expect-error -- plain ESM bench modules, no types
import * as planeModule from '../../bench/credential-plane.mjs';
// @ts-expect-error -- plain ESM bench modules, no types
import * as libModule from '../../bench/lib.mjs';

/** The part of the bench harness this test drives. */
interface BenchPlane {
  DEFAULT_CEILING_MS: number;
  BENCH_SESSION_KEY: string;
  assemblePlane(o: { label: string; scoping: string; liveness: string }): Promise<Plane>;
  startServer(p: Plane, impl: unknown, label: string): Promise<{ url: string }>;
  dagSpec(partial: object): object;
  taskSpec(taskId: string): object;
  launchAttempts(p: Plane, spec: object, runs: number, url: string): Promise<{ token: string }[]>;
}
interface Plane {
  service(ceilingMs: number): unknown;
}
const plane = planeModule as BenchPlane;
const { cleanupAll } = libModule as { cleanupAll: () => Promise<void> };

afterAll(async () => {
  await cleanupAll();
});

describe('bench harness (smoke)', () => {
  it('assembles the credential plane and serves Heartbeat and GetConnections', async () => {
    const p = await plane.assemblePlane({
      label: 'smoke',
      scoping: 'enforce',
      liveness: 'enforce',
    });
    const server = await plane.startServer(p, p.service(plane.DEFAULT_CEILING_MS), 'smoke');
    const spec = plane.dagSpec({ dag_id: 'smoke', tasks: [plane.taskSpec('t')] });
    const [launch] = await plane.launchAttempts(p, spec, 1, server.url);
    const client = createClient(AgentService, createGrpcTransport({ baseUrl: server.url }));
    // launchAttempts registered each attempt with the bench agents' session key; every later
    // attempt RPC carries it, as a real agent's does (issue 34)
    const headers = {
      authorization: `Bearer ${launch!.token}`,
      [SESSION_HEADER]: plane.BENCH_SESSION_KEY,
    };
    const hb = await client.heartbeat({ sentAtMs: 0n }, { headers });
    expect(hb.shouldTerminate).toBe(false);
    expect(hb.renewedToken).not.toBe('');
    const conns = await client.getConnections({}, { headers });
    expect(conns.connectionUris).toEqual({});
  });
});
