import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { ServerConfig } from '../config/server-config.js';
import { ControlPlaneReplicas } from '../store/kysely/control-plane-replicas.js';
import type { KyselyStore } from '../store/kysely-store.js';
import type { Store } from '../store/store.js';
import type { Lifecycle } from './lifecycle.js';

/** How often a replica refreshes its row; a row not refreshed for 3 × this is a replica gone. */
export const REPLICA_SEEN_INTERVAL_MS = 30_000;

/** A fresh id per process start: the lease holder and the replica's row share it. */
export function replicaInstanceId(): string {
  return `${hostname()}/${process.pid}/${randomUUID().slice(0, 8)}`;
}

/**
 * Pro: records this replica and the agent URLs it hands its agents, and warns when another
 * replica of this database, seen recently, advertises a different set. An agent reaches only the
 * URLs its own replica gave it, so replicas that disagree strand agents when their replica goes
 * (docs/pro.md, "Agents follow the control plane"). The row is refreshed while the replica runs
 * and removed when it stops.
 */
export async function recordReplica(
  cfg: ServerConfig,
  d: {
    store: Store;
    logger: Logger;
    life: Lifecycle;
    instance: string;
    role: string;
    agentUrls: readonly string[];
  },
): Promise<void> {
  const { logger, life, instance, role, agentUrls } = d;
  if (!cfg.pro) return;
  const replicas = new ControlPlaneReplicas((d.store as KyselyStore).kysely);
  await replicas.register({ instance, role, agentUrls });
  const mine = JSON.stringify([...agentUrls].sort());
  const differ = (await replicas.others(instance, 3 * REPLICA_SEEN_INTERVAL_MS)).filter(
    (r) => JSON.stringify(r.agentUrls) !== mine,
  );
  if (differ.length > 0) {
    logger.warn(
      {
        agentUrls,
        others: differ.map((r) => ({ instance: r.instance, role: r.role, agentUrls: r.agentUrls })),
      },
      `replicas advertise different agent URLs: this one gives agents ${agentUrls.join(',')}; ${differ
        .map((r) => `${r.instance} gives ${r.agentUrls.join(',')}`)
        .join(
          '; ',
        )}. An agent can reach only the URLs its replica gave it: give every replica the same --agent-advertise-url (every replica's agent URL, or one address in front of them all)`,
    );
  }
  const timer = setInterval(() => {
    replicas.seen(instance).catch((err: unknown) => {
      logger.debug({ err }, 'could not refresh this replica in control_plane_replicas');
    });
  }, REPLICA_SEEN_INTERVAL_MS);
  timer.unref();
  life.add({
    name: 'replica record',
    stop: async () => {
      clearInterval(timer);
      await replicas.remove(instance).catch(() => undefined);
    },
  });
}
