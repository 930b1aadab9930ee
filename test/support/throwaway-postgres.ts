import { execFile } from 'node:child_process';
import {
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  renameSync,
  rmSync,
  statSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort } from './pro-cluster.js';

const run = promisify(execFile);

/** PostgreSQL 15's server binaries, as Debian installs them (scripts/dev-services.sh). */
export const PG_BIN = process.env['LEOFLOW_TEST_PG_BIN'] ?? '/usr/lib/postgresql/15/bin';

/**
 * initdb refuses to run as root, and a cluster's files must belong to the user its server runs
 * as: as root, everything runs as the `postgres` account (runuser); otherwise as ourselves.
 */
function asClusterUser(): { prefix: string[]; uid: number | undefined; gid: number | undefined } {
  if (process.getuid?.() !== 0) return { prefix: [], uid: undefined, gid: undefined };
  const home = statSync('/var/lib/postgresql', { throwIfNoEntry: false });
  return {
    prefix: ['/usr/sbin/runuser', '-u', 'postgres', '--'],
    uid: home?.uid,
    gid: home?.gid,
  };
}

async function asUser(bin: string, args: string[]): Promise<string> {
  const u = asClusterUser();
  const [cmd, ...rest] = [...u.prefix, join(PG_BIN, bin), ...args];
  const { stdout } = await run(cmd!, rest, { encoding: 'utf8' });
  return stdout;
}

function giveToClusterUser(path: string): void {
  const u = asClusterUser();
  if (u.uid !== undefined && u.gid !== undefined) chownSync(path, u.uid, u.gid);
}

/**
 * One initdb per machine and PostgreSQL version, copied per cluster: initdb takes seconds on
 * this machine, a copy of its 40 MB a fraction of one. Made in a private directory and renamed
 * into place, so two test files asking at once never see half a template.
 */
async function template(): Promise<string> {
  const dir = join(tmpdir(), `leoflow-pg-template-${PG_BIN.replace(/\W+/g, '_')}`);
  if (existsSync(join(dir, 'PG_VERSION'))) return dir;
  const scratch = mkdtempSync(join(tmpdir(), 'leoflow-pg-initdb-'));
  giveToClusterUser(scratch);
  const data = join(scratch, 'data');
  await asUser('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--no-sync']);
  try {
    renameSync(data, dir);
  } catch {
    // another test file won the race: its template is as good as ours
  }
  rmSync(scratch, { recursive: true, force: true });
  return dir;
}

export interface ThrowawayPostgres {
  /** postgres://postgres@127.0.0.1:<port>/postgres (trust auth) */
  url: string;
  port: number;
  /** the server's log (startup failures, crash recovery) */
  log(): Promise<string>;
  /** pg_ctl stop: `fast` rolls back open transactions and closes every connection */
  stop(mode?: 'fast' | 'immediate'): Promise<void>;
  start(): Promise<void>;
  /** a fast restart: stop -m fast, then start (what an operator's restart does) */
  restart(): Promise<void>;
  /** stops the server (if it runs) and removes its files */
  destroy(): Promise<void>;
}

/**
 * A PostgreSQL cluster of its own — its own data directory (a copy of one initdb), its own port,
 * loopback only, trust auth, fsync off — for a test that stops, restarts or cuts its database.
 * The shared cluster on 5432 is never touched: other test files use it at the same moment.
 */
export async function startThrowawayPostgres(label: string): Promise<ThrowawayPostgres> {
  const source = await template();
  const root = mkdtempSync(join(tmpdir(), `leoflow-pg-${label}-`));
  giveToClusterUser(root);
  const data = join(root, 'data');
  const u = asClusterUser();
  const cp = [...u.prefix, '/bin/cp', '-a', source, data];
  await run(cp[0]!, cp.slice(1));
  mkdirSync(join(root, 'socket'), { recursive: true });
  giveToClusterUser(join(root, 'socket'));
  const port = await freePort();
  const logFile = join(root, 'postgres.log');
  const options = [
    `-p ${port}`,
    `-k ${join(root, 'socket')}`,
    '-c listen_addresses=127.0.0.1',
    '-c fsync=off',
    '-c synchronous_commit=off',
    '-c full_page_writes=off',
    '-c shared_buffers=16MB',
    '-c max_connections=60',
  ].join(' ');
  let running = false;
  const pgCtl = (args: string[]) => asUser('pg_ctl', ['-D', data, ...args]);
  const start = async () => {
    await pgCtl(['-o', options, '-l', logFile, '-w', '-t', '60', 'start']);
    running = true;
  };
  const stop = async (mode: 'fast' | 'immediate' = 'fast') => {
    if (!running) return;
    await pgCtl(['-m', mode, '-w', '-t', '60', 'stop']);
    running = false;
  };
  await start();
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  // Ready for clients, not only listening.
  for (let i = 0; ; i++) {
    const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
    c.on('error', () => undefined);
    try {
      await c.connect();
      await c.end();
      break;
    } catch (err) {
      if (i > 50) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    url,
    port,
    log: async () => {
      const { readFileSync } = await import('node:fs');
      return existsSync(logFile) ? readFileSync(logFile, 'utf8') : '';
    },
    stop,
    start,
    restart: async () => {
      await stop('fast');
      await start();
    },
    destroy: async () => {
      await stop('immediate').catch(() => undefined);
      rmSync(root, { recursive: true, force: true });
    },
  };
}
