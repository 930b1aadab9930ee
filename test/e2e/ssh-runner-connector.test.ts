import type { Duplex } from 'node:stream';
import type { Connection } from '@leoflow/core';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RunnerSessions } from '../../packages/server/src/runners/runner-sessions.js';
import { SESSION_CLOSE } from '@leoflow/protocol';
import {
  SshRunnerDialer,
  type SshRunner,
  type SshRunnerLaunch,
} from '../../packages/server/src/runners/ssh-dialer.js';
import {
  SshRunnerConnector,
  type SshSessionIdentity,
} from '../../packages/server/src/runners/ssh-runner-connector.js';
import { waitFor } from '../support/processes.js';
import { SSHD, SSHD_HOWTO, sshdAvailability, startSshd, type Sshd } from '../support/sshd.js';

/**
 * The cell keeps its ssh runners connected, against Debian's real sshd: a listed runner is
 * dialed and its channel served as that runner's session; a session that ends is dialed again;
 * a refused dial is retried and never served; deleting the runner or dropping it from the list
 * hangs up for good.
 */
const availability = sshdAvailability();
let sshd: Sshd;
let connector: SshRunnerConnector | undefined;

beforeAll(async () => {
  if (availability === 'run') sshd = await startSshd();
}, 60_000);
afterAll(() => sshd?.stop());
afterEach(() => connector?.close());

function sshRunner(id: string, host_key = sshd.knownHostsLine): SshRunner {
  return {
    id,
    tenant_id: 'default',
    name: id.replace('rnr_', ''),
    ssh: { host: '127.0.0.1', port: sshd.port, user: sshd.user, credential: 'key', host_key },
  };
}

function setup(launch: SshRunnerLaunch, list: SshRunner[]) {
  const key: Connection = {
    conn_type: 'ssh',
    host: null,
    login: null,
    password: null,
    schema: null,
    port: null,
    extra: { private_key: sshd.client.privateKey },
  };
  const dialer = new SshRunnerDialer({
    connection: async () => key,
    launch,
    logger: pino({ level: 'silent' }),
  });
  const dials: string[] = [];
  const served: { who: SshSessionIdentity; stream: Duplex }[] = [];
  const sessions = new RunnerSessions();
  const wanted = { list };
  connector = new SshRunnerConnector({
    dialer: {
      dial: (r) => {
        dials.push(r.id);
        return dialer.dial(r);
      },
    },
    // Reads everything, as the HTTP/2 server the cell serves with does.
    serve: (who, stream) => {
      served.push({ who, stream });
      stream.on('data', () => undefined);
    },
    sessions,
    runners: async () => wanted.list,
    logger: pino({ level: 'silent' }),
    backoffMs: () => 50,
  });
  return { dials, served, sessions, wanted, connector };
}

describe.runIf(availability === 'missing')('the ssh runner connector (sshd missing)', () => {
  it('requires sshd (CI=true or LEOFLOW_TEST_REQUIRE_SSHD=1)', () => {
    throw new Error(`sshd is required but ${SSHD} does not exist; to fix: ${SSHD_HOWTO}`);
  });
});

describe.runIf(availability === 'run').sequential('the ssh runner connector', () => {
  it('dials a listed runner and serves its channel as that runner’s session', async () => {
    const t = setup({ kind: 'command', command: 'cat' }, [sshRunner('rnr_one')]);
    await t.connector.start();
    const s = await waitFor('a served session', async () => t.served[0]);
    expect(s.who).toEqual({ runner_id: 'rnr_one', tenant_id: 'default' });
    const echoed = new Promise<string>((r) => s.stream.once('data', (b: Buffer) => r(String(b))));
    s.stream.write('ping');
    expect(await echoed).toBe('ping');
    expect(t.connector.connected('rnr_one')).toBe(true);
    expect(t.sessions.count('rnr_one')).toBe(1);
  });

  it('dials again when the session ends', async () => {
    // The remote command ends at once: every session is short, and each is followed by a redial.
    const t = setup({ kind: 'command', command: 'true' }, [sshRunner('rnr_short')]);
    await t.connector.start();
    await waitFor('three dials', async () => (t.dials.length >= 3 ? true : undefined));
    expect(t.served.length).toBeGreaterThanOrEqual(2);
  });

  it('retries a refused dial and never serves it', async () => {
    const wrong = `SHA256:${'B'.repeat(43)}`;
    const t = setup({ kind: 'command', command: 'cat' }, [sshRunner('rnr_rekeyed', wrong)]);
    await t.connector.start();
    await waitFor('three dials', async () => (t.dials.length >= 3 ? true : undefined));
    expect(t.served).toEqual([]);
    expect(t.connector.connected('rnr_rekeyed')).toBe(false);
  });

  it('hangs up for good when the runner is deleted, or leaves the list', async () => {
    const t = setup({ kind: 'command', command: 'cat' }, [
      sshRunner('rnr_deleted'),
      sshRunner('rnr_unlisted'),
    ]);
    await t.connector.start();
    await waitFor('two sessions', async () => (t.served.length === 2 ? true : undefined));
    const ended = (id: string) =>
      new Promise<void>((r) =>
        t.served.find((s) => s.who.runner_id === id)?.stream.once('close', r),
      );
    const deleted = ended('rnr_deleted');
    expect(t.sessions.closeRunner('rnr_deleted', SESSION_CLOSE.runnerDeleted)).toBe(1);
    await deleted;
    const unlisted = ended('rnr_unlisted');
    t.wanted.list = [];
    await t.connector.refresh();
    await unlisted;
    const dialsSoFar = t.dials.length;
    await new Promise((r) => setTimeout(r, 300));
    expect(t.dials.length).toBe(dialsSoFar);
    expect(t.connector.connected('rnr_deleted')).toBe(false);
    expect(t.connector.connected('rnr_unlisted')).toBe(false);
  });
});
