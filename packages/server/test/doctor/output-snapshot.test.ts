import { describe, expect, it } from 'vitest';
import { defaultServerConfig, type ServerConfig } from '../../src/config/server-config.js';
import {
  buildDoctorReport,
  type DoctorDeps,
  type DoctorOptions,
  type DoctorStore,
  type FileInfo,
} from '../../src/doctor/report.js';
import { renderDoctorReport } from '../../src/doctor/render.js';

/**
 * `leoflow doctor` output, byte for byte, for a few configurations on a fixed fake machine: the
 * JSON (`-o json`) and the text report. Written before doctor was split into one module per
 * section (issue 12) and kept as the proof the split changed nothing. A deliberate change to the
 * output updates these files (`vitest -u`) in the same commit.
 */

const DIR = '/srv/lf';
const INSTALL_ID = '0123456789abcdef';
const WORK_ROOT = `/tmp/leoflow-work-${INSTALL_ID}`;
const SDK = `${WORK_ROOT}/node_modules/@leoflow/sdk/index.mjs`;
const PASSWD = 'root:x:0:0::/root:/bin/sh\nnobody:x:65534:65534::/:/usr/sbin/nologin\n';
const GROUP = 'root:x:0:\nnogroup:x:65534:\n';

function part(o: unknown): string {
  return Buffer.from(JSON.stringify(o)).toString('base64url');
}

interface MachineOptions {
  uid: number | null;
  env?: Record<string, string>;
  dataDir?: 'ok' | 'missing' | 'open';
  pending?: string[];
  undeclared?: boolean;
  secureDelete?: number;
  adminExpires?: boolean;
  prlimit?: boolean;
  cgroup?: boolean;
}

function machine(o: MachineOptions): DoctorDeps {
  const owner = o.uid ?? 1000;
  const files = new Map<string, FileInfo>();
  const dir = (mode = 0o700, dev = 1): FileInfo => ({ mode, uid: owner, dev, kind: 'directory' });
  const file = (mode = 0o600, dev = 1): FileInfo => ({ mode, uid: owner, dev, kind: 'file' });
  if (o.dataDir !== 'missing') {
    files.set(DIR, dir(o.dataDir === 'open' ? 0o755 : 0o700));
    files.set(`${DIR}/keys`, dir());
    files.set(`${DIR}/keys/keyring.json`, file(o.dataDir === 'open' ? 0o644 : 0o600));
    files.set(`${DIR}/keys/agent-signing-keys.json`, file());
    files.set(`${DIR}/keys/user-signing-keys.json`, file());
    files.set(`${DIR}/admin.token`, file());
    files.set(`${DIR}/leoflow.db`, file());
    files.set(`${DIR}/leoflow.db-wal`, file());
  }
  files.set('/', dir(0o755));
  files.set('/tmp', dir(0o1777));
  files.set(WORK_ROOT, dir(0o711));
  for (const d of ['node_modules', 'node_modules/@leoflow', 'node_modules/@leoflow/sdk'])
    files.set(`${WORK_ROOT}/${d}`, dir(0o755));
  files.set(SDK, file(0o644));
  if (o.prlimit !== false)
    files.set('/usr/bin/prlimit', { mode: 0o755, uid: 0, dev: 1, kind: 'file' });
  files.set('/etc/leoflow/agent.crt', file(0o644, 2));
  files.set('/etc/leoflow/agent.key', file(0o600, 2));
  files.set('/srv/dags', dir(0o755, 2));
  const texts = new Map<string, string>([
    ['/etc/passwd', PASSWD],
    ['/etc/group', GROUP],
    ['/proc/sys/kernel/yama/ptrace_scope', '0\n'],
    [
      `${DIR}/admin.token`,
      `${part({ alg: 'EdDSA' })}.${part(o.adminExpires ? { sub: 'admin', exp: 2_000_000_000 } : { sub: 'admin' })}.c2ln\n`,
    ],
    [`${DIR}/install-id`, `${INSTALL_ID}\n`],
    ['/etc/leoflow/agent.crt', `${AGENT_CERT}\n`],
  ]);
  if (o.cgroup) {
    texts.set('/proc/self/cgroup', '0::/system.slice/leoflow.service\n');
    texts.set(
      '/proc/self/mountinfo',
      '30 24 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw\n',
    );
    texts.set(
      '/sys/fs/cgroup/system.slice/leoflow.service/cgroup.controllers',
      'cpu memory pids\n',
    );
  }
  const migrations = ['0001_initial', '0002_vault', '0003_tokens'];
  const pending = o.pending ?? [];
  const base: DoctorStore = {
    migrationStatus: () =>
      Promise.resolve({ applied: migrations.filter((m) => !pending.includes(m)), pending }),
    close: () => Promise.resolve(),
  };
  return {
    stat: (p) => Promise.resolve(files.get(p) ?? null),
    readText: (p) => Promise.resolve(texts.get(p) ?? null),
    uid: o.uid,
    // A fixed time, so the agent certificate's days left do not change between runs.
    now: () => Date.parse('2026-12-01T00:00:00Z'),
    env: { PATH: '/usr/local/bin:/usr/bin', ...(o.env ?? {}) },
    openStore: (db) =>
      Promise.resolve<DoctorStore>(
        db.kind === 'postgres'
          ? base
          : {
              ...base,
              secureDelete: () => Promise.resolve(o.secureDelete ?? 1),
              undeclaredUse: () =>
                Promise.resolve(
                  o.undeclared
                    ? [
                        {
                          dag_id: 'etl',
                          variables: ['region'],
                          connections: ['warehouse'],
                          attempts: 3,
                          last_seen: 0,
                        },
                        {
                          dag_id: 'report',
                          variables: [],
                          connections: ['smtp'],
                          attempts: 1,
                          last_seen: 0,
                        },
                      ]
                    : [],
                ),
            },
      ),
  };
}

function config(edit: (c: ServerConfig) => void = () => undefined): ServerConfig {
  const c = defaultServerConfig(DIR);
  edit(c);
  return c;
}

/** A self-signed agent certificate valid until 2036-11-29 (made once with openssl). */
const AGENT_CERT = `-----BEGIN CERTIFICATE-----
MIIBljCCAT2gAwIBAgIUbLrPp4Ktg4WmqJGDNWj7+CGYTdUwCgYIKoZIzj0EAwIw
ITEfMB0GA1UEAwwWYWdlbnQubGVvZmxvdy5pbnRlcm5hbDAeFw0yNjEyMDIwMzIy
NTdaFw0zNjExMjkwMzIyNTdaMCExHzAdBgNVBAMMFmFnZW50Lmxlb2Zsb3cuaW50
ZXJuYWwwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAATs+wkwSu2vF6Jenz8OmdMJ
cDb1dj5ruhKjw2om0YxsE+K2c4sFbWgL9dwVZ7BPyNxlLB2yJdnTJkboXmWwaCPo
o1MwUTAdBgNVHQ4EFgQU3/BmWMNC1uCDofgmMrhDqddEiJMwHwYDVR0jBBgwFoAU
3/BmWMNC1uCDofgmMrhDqddEiJMwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQD
AgNHADBEAiANRGb/pcbLSBP7hzvp1lxrROk+9/MXPLqlwBz3iAkYMAIgVA35mqnE
nPX/WYWsYd+Ik4crRwufbGxqrS5sIhDsGF4=
-----END CERTIFICATE-----`;

const CASES: Record<string, { cfg: ServerConfig; deps: DoctorDeps; opts?: DoctorOptions }> = {
  // a developer's laptop: not root, SQLite, every default
  'laptop-defaults': { cfg: config(), deps: machine({ uid: 1000 }) },
  // production-ish Lite: root with per-attempt uids, TLS agent port, enforce, dags folder,
  // an env vault key, an expiring admin token, undeclared use on record, cgroup v2 present
  'root-hardened': {
    cfg: config((c) => {
      c.agent.host = '0.0.0.0';
      c.agent.tls = {
        certFile: '/etc/leoflow/agent.crt',
        keyFile: '/etc/leoflow/agent.key',
        caFile: null,
      };
      c.credentials.secretScoping = 'enforce';
      c.credentials.secretLivenessMode = 'enforce';
      c.dagsFolder = '/srv/dags';
      c.metrics.port = 9464;
    }),
    deps: machine({
      uid: 0,
      env: { LEOFLOW_SECRET_KEY: Buffer.alloc(32, 7).toString('base64') },
      adminExpires: true,
      undeclared: true,
      cgroup: true,
    }),
  },
  // everything wrong: open data dir, PostgreSQL password on the command line, cleartext agent on
  // a public address, shared run-as user that does not exist, scoping off, no ceiling
  'misconfigured-postgres': {
    cfg: config((c) => {
      c.database = { kind: 'postgres', url: 'postgres://lf:pw-canary@db.internal:5432/lf' };
      c.agent.host = '0.0.0.0';
      c.http.host = '0.0.0.0';
      c.metrics = { host: '0.0.0.0', port: 9464 };
      c.subprocess.attemptUidRange = null;
      c.subprocess.runAsUser = 'leoflow-tasks';
      c.subprocess.attemptNprocLimit = 0;
      c.credentials.secretScoping = 'off';
      // the rollout mode, named: it was this case's default before issue 34
      c.credentials.secretLivenessMode = 'observe';
      c.credentials.maxAttemptCredentialLifetimeSeconds = 0;
      c.credentials.warmPoolsEnabled = true;
      c.dagsFolder = '/srv/missing-dags';
    }),
    deps: machine({ uid: 0, dataDir: 'open', pending: ['0003_tokens'], prlimit: false }),
    opts: { databaseUrlSource: 'flag' },
  },
  // first run: no data dir yet, as a user without uids
  'fresh-no-data-dir': {
    cfg: config(),
    deps: machine({ uid: null, dataDir: 'missing', secureDelete: 0 }),
  },
  // root with the shared user (attempt uid range off) and a keyring file outside the data dir,
  // bringing in Airflow DAGs: the migration and rollout modes (the defaults before issue 34)
  'root-shared-user': {
    cfg: config((c) => {
      c.subprocess.attemptUidRange = null;
      c.credentials.secretScoping = 'permissive';
      c.credentials.secretLivenessMode = 'observe';
    }),
    deps: machine({
      uid: 0,
      env: { LEOFLOW_SECRET_KEYRING_FILE: '/etc/leoflow/agent.key' },
      secureDelete: 2,
    }),
    opts: { databaseUrlSource: 'env' },
  },
};

describe('doctor output is unchanged (snapshots taken before the per-section split)', () => {
  for (const [name, c] of Object.entries(CASES)) {
    it(`${name}: -o json and text`, async () => {
      const r = await buildDoctorReport(c.cfg, c.deps, c.opts);
      await expect(`${JSON.stringify(r, null, 2)}\n`).toMatchFileSnapshot(
        `./__snapshots__/output/${name}.json`,
      );
      await expect(renderDoctorReport(r)).toMatchFileSnapshot(`./__snapshots__/output/${name}.txt`);
    });
  }
});
