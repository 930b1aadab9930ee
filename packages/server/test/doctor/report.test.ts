import { describe, expect, it, vi } from 'vitest';
import { defaultServerConfig, type ServerConfig } from '../../src/config/server-config.js';
import {
  buildDoctorReport,
  NOT_IN_THIS_BUILD,
  tokenTransportOf,
  type DoctorDeps,
  type DoctorReport,
  type DoctorStore,
  type FileInfo,
} from '../../src/doctor/report.js';
import { renderDoctorReport } from '../../src/doctor/render.js';
import { redactDatabaseUrl, scrub } from '../../src/doctor/redact.js';

const DIR = '/srv/lf';
const ME = 1000;
const FILES = {
  vault: `${DIR}/keys/keyring.json`,
  agent: `${DIR}/keys/agent-signing-keys.json`,
  user: `${DIR}/keys/user-signing-keys.json`,
  admin: `${DIR}/admin.token`,
  db: `${DIR}/leoflow.db`,
  wal: `${DIR}/leoflow.db-wal`,
};
const PASSWD = 'root:x:0:0::/root:/bin/sh\nnobody:x:65534:65534::/:/usr/sbin/nologin\n';
const INSTALL_ID = '0123456789abcdef';
const WORK_ROOT = `/tmp/leoflow-work-${INSTALL_ID}`;
const SDK = `${WORK_ROOT}/node_modules/@leoflow/sdk/index.mjs`;
const MIGRATIONS = ['0001_initial', '0002_vault'];
// A key the env may carry; it must never appear in a report.
const ENV_KEY = 'k'.repeat(32);

function jwt(claims: Record<string, unknown>): string {
  const part = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${part({ alg: 'EdDSA' })}.${part(claims)}.c2lnbmF0dXJl`;
}

interface Machine {
  deps: DoctorDeps;
  files: Map<string, FileInfo>;
  texts: Map<string, string>;
  store: DoctorStore & { pending: string[]; secure: number; closed: boolean };
  openStore: ReturnType<typeof vi.fn>;
}

/** A healthy Lite install as seen by uid 1000, every file in place and owner-only. */
function machine(
  over: { uid?: number | null; env?: Record<string, string>; openError?: Error } = {},
): Machine {
  const uid = over.uid === undefined ? ME : over.uid;
  const owner = uid ?? ME;
  const files = new Map<string, FileInfo>();
  const dir = (mode = 0o700): FileInfo => ({ mode, uid: owner, dev: 1, kind: 'directory' });
  const file = (mode = 0o600): FileInfo => ({ mode, uid: owner, dev: 1, kind: 'file' });
  files.set(DIR, dir());
  files.set(`${DIR}/keys`, dir());
  for (const f of Object.values(FILES)) files.set(f, file());
  // the work root standalone made, with the SDK copy node tasks import (0755 dirs, 0644 file)
  files.set('/', dir(0o755));
  files.set('/tmp', dir(0o1777));
  files.set(WORK_ROOT, dir(0o711));
  for (const d of ['node_modules', 'node_modules/@leoflow', 'node_modules/@leoflow/sdk'])
    files.set(`${WORK_ROOT}/${d}`, dir(0o755));
  files.set(SDK, file(0o644));
  files.set('/usr/bin/prlimit', { mode: 0o755, uid: 0, dev: 1, kind: 'file' });
  const texts = new Map<string, string>([
    ['/etc/passwd', PASSWD],
    ['/proc/sys/kernel/yama/ptrace_scope', '1\n'],
    [FILES.admin, `${jwt({ sub: 'admin', role: 'admin' })}\n`],
    [`${DIR}/install-id`, `${INSTALL_ID}\n`],
  ]);
  const store = {
    pending: [] as string[],
    secure: 1,
    closed: false,
    migrationStatus() {
      return Promise.resolve({
        applied: MIGRATIONS.filter((m) => !this.pending.includes(m)),
        pending: this.pending,
      });
    },
    secureDelete() {
      return Promise.resolve(this.secure);
    },
    close() {
      this.closed = true;
      return Promise.resolve();
    },
  };
  const openStore = vi.fn((db: ServerConfig['database']) => {
    if (over.openError) return Promise.reject(over.openError);
    // PostgreSQL has no secure_delete pragma.
    const pgStore: DoctorStore = {
      migrationStatus: () => store.migrationStatus(),
      close: () => store.close(),
    };
    return Promise.resolve<DoctorStore>(db.kind === 'postgres' ? pgStore : store);
  });
  const deps: DoctorDeps = {
    stat: (p) => Promise.resolve(files.get(p) ?? null),
    readText: (p) => Promise.resolve(texts.get(p) ?? null),
    uid,
    env: over.env ?? {},
    openStore,
  };
  return { deps, files, texts, store, openStore };
}

function config(edit: (c: ServerConfig) => void = () => undefined): ServerConfig {
  const c = defaultServerConfig(DIR);
  edit(c);
  return c;
}

function byId(r: DoctorReport, id: string) {
  const found = r.checks.find((c) => c.id === id);
  if (!found) throw new Error(`no check ${id} in ${r.checks.map((c) => c.id).join(', ')}`);
  return found;
}

const exposureIds = (r: DoctorReport) => r.posture.exposures.map((e) => e.id);

describe('doctor report: a healthy Lite install', () => {
  it('fails nothing and names every check with a stable id', async () => {
    const m = machine();
    const r = await buildDoctorReport(config(), m.deps);
    expect(r.summary.fail).toBe(0);
    expect(r.checks.map((c) => c.id)).toEqual([
      'data_dir.exists',
      'data_dir.mode',
      'data_dir.owner',
      'keys_dir.mode',
      'key_file.vault_keyring',
      'key_file.agent_signing_keys',
      'key_file.user_signing_keys',
      'key_file.admin_token',
      'key_file.database',
      'vault_key.source',
      'datastore.reachable',
      'datastore.migrations',
      'datastore.secure_delete',
      'agent.channel',
      'tasks.run_as',
      'work_root.owner',
      'tasks.sdk_reachable',
    ]);
    expect(m.store.closed).toBe(true);
    expect(r.summary).toEqual({
      ok: r.checks.filter((c) => c.status === 'ok').length,
      warn: 1, // tasks.run_as: not root
      fail: 0,
    });
  });

  it('reports the credential-plane posture', async () => {
    const r = await buildDoctorReport(config(), machine().deps);
    expect(r.posture).toMatchObject({
      secret_scoping: 'enforce',
      secret_liveness_mode: 'enforce',
      attempt_token_ttl: '10m',
      max_attempt_credential_lifetime: '24h',
      token_transport: {
        subprocess: 'inherited pipe fd 3, memory only',
        kubernetes:
          'literal env value LEOFLOW_AGENT_TOKEN on the Pod object (auth.agent_token_transport=envvar)',
        configured: 'envvar',
        exchange_bootstrap: 'projected_token',
      },
      key_storage: {
        vault: { source: 'lite-keyring-file', file: FILES.vault, mode: '0600', env_var: null },
        agent_signing: { file: FILES.agent, mode: '0600' },
        user_signing: { file: FILES.user, mode: '0600' },
        admin_token: { file: FILES.admin, mode: '0600', expires: false },
      },
      agent_channel: {
        mode: 'cleartext-loopback',
        address: '127.0.0.1:8793',
        secrets_delivered: true,
      },
      tasks_run_as: { isolated: false, uid: ME },
    });
    // What the executors say of themselves, and the running executor agrees with its kind.
    expect(tokenTransportOf('subprocess', config())).toBe('inherited pipe fd 3, memory only');
    expect(tokenTransportOf('kubernetes', config())).toMatch(
      /^literal env value LEOFLOW_AGENT_TOKEN/,
    );
    expect(tokenTransportOf('runner', config())).toBe(
      'in-band on the runner session (AwaitAssignment)',
    );
    expect(tokenTransportOf('ssh-carrier-pigeon', config())).toBe(NOT_IN_THIS_BUILD);
    expect(r.posture.token_transport.subprocess).toBe('inherited pipe fd 3, memory only');
  });

  it('names each residual exposure of the defaults in one sentence, with a fix', async () => {
    // the defaults no longer leave the credential plane open; the migration and rollout modes
    // are named explicitly here so their sentences keep being checked
    const r = await buildDoctorReport(
      config((c) => {
        c.credentials.secretScoping = 'permissive';
        c.credentials.secretLivenessMode = 'observe';
      }),
      machine().deps,
    );
    const defaults = exposureIds(await buildDoctorReport(config(), machine().deps));
    expect(defaults.filter((id) => id.startsWith('secret_'))).toEqual([]);
    expect(exposureIds(r)).toEqual([
      'secret_scoping.permissive',
      'secret_liveness.observe',
      'tasks.shared_uid',
      'tasks.same_user',
      'vault_key.beside_database',
      'admin_token.no_expiry',
      'agent_channel.cleartext_loopback',
    ]);
    for (const e of r.posture.exposures) {
      expect(e.sentence).toMatch(/^[A-Z].*\.$/);
      expect(e.sentence.split(/\.\s+[A-Z]/).length).toBe(1);
      expect(e.remedy).not.toBe('');
    }
    const text = (id: string) => r.posture.exposures.find((e) => e.id === id)?.sentence ?? '';
    expect(text('secret_scoping.permissive')).toContain('did not declare');
    expect(text('secret_liveness.observe')).toContain('until that token expires');
    expect(text('tasks.same_user')).toContain('can read the data dir');
    expect(text('tasks.same_user')).toContain('vault keyring');
    expect(text('vault_key.beside_database')).toContain(FILES.vault);
    expect(text('admin_token.no_expiry')).toContain('no expiry');
  });
});

it('with the Kubernetes executor configured, names the envvar exposure (the Pod object) and its fix', async () => {
  const cfg = config();
  cfg.kubernetes = {
    kubeconfig: null,
    agentImage: 'leoflow-agent:1',
    agentUrl: null,
    podStartTimeoutMs: 300_000,
    instance: 'leoflow',
    runAsUser: 65532,
    terminationGracePeriodSeconds: 30,
    agentCaConfigMap: null,
    keepFinishedPods: false,
    tenants: {},
  };
  const r = await buildDoctorReport(cfg, machine().deps);
  const e = r.posture.exposures.find((x) => x.id === 'token_transport.envvar');
  expect(e?.sentence).toContain('plaintext env value on its Pod');
  expect(e?.sentence).toContain('get pods');
  expect(e?.sentence).toMatch(/^[A-Z].*\.$/);
  expect(e?.sentence.split(/\.\s+[A-Z]/).length).toBe(1);
  expect(e?.remedy).toContain('auth.agent_token_transport=exchange');
  // Without the section nothing is exposed through it.
  expect(
    (await buildDoctorReport(config(), machine().deps)).posture.exposures.map((x) => x.id),
  ).not.toContain('token_transport.envvar');
});

describe('doctor checks: data directory', () => {
  it('fails when the data dir does not exist, says to run standalone, and opens nothing', async () => {
    const m = machine();
    m.files.clear();
    const r = await buildDoctorReport(config(), m.deps);
    const c = byId(r, 'data_dir.exists');
    expect(c.status).toBe('fail');
    expect(c.message).toContain('leoflow standalone');
    expect(c.message).toContain('--data-dir');
    expect(m.openStore).not.toHaveBeenCalled();
    expect(r.checks.some((k) => k.id.startsWith('key_file.'))).toBe(false);
  });

  it('fails on mode 0755 naming chmod 700, and passes 0700', async () => {
    const m = machine();
    m.files.set(DIR, { ...m.files.get(DIR)!, mode: 0o755 });
    const bad = byId(await buildDoctorReport(config(), m.deps), 'data_dir.mode');
    expect(bad.status).toBe('fail');
    expect(bad.message).toContain(`chmod 700 ${DIR}`);
    expect(bad.message).toContain('0755');
    m.files.set(DIR, { ...m.files.get(DIR)!, mode: 0o700 });
    expect(byId(await buildDoctorReport(config(), m.deps), 'data_dir.mode').status).toBe('ok');
  });

  it('fails when another user owns the data dir', async () => {
    const m = machine();
    m.files.set(DIR, { ...m.files.get(DIR)!, uid: 0 });
    const c = byId(await buildDoctorReport(config(), m.deps), 'data_dir.owner');
    expect(c.status).toBe('fail');
    expect(c.message).toContain('uid 0');
    expect(byId(await buildDoctorReport(config(), machine().deps), 'data_dir.owner').status).toBe(
      'ok',
    );
  });

  it('fails when it is a file, not a directory', async () => {
    const m = machine();
    m.files.set(DIR, { ...m.files.get(FILES.db)! });
    expect(byId(await buildDoctorReport(config(), m.deps), 'data_dir.exists').status).toBe('fail');
  });

  it('reports a stat error instead of throwing', async () => {
    const m = machine();
    m.deps.stat = (p) =>
      p === DIR
        ? Promise.reject(Object.assign(new Error('denied'), { code: 'EACCES' }))
        : Promise.resolve(null);
    const c = byId(await buildDoctorReport(config(), m.deps), 'data_dir.exists');
    expect(c.status).toBe('fail');
    expect(c.message).toContain('EACCES');
  });

  it('fails a keys dir other users can enter', async () => {
    const m = machine();
    m.files.set(`${DIR}/keys`, { ...m.files.get(`${DIR}/keys`)!, mode: 0o755 });
    const c = byId(await buildDoctorReport(config(), m.deps), 'keys_dir.mode');
    expect(c.status).toBe('fail');
    expect(c.message).toContain(`chmod 700 ${DIR}/keys`);
  });
});

describe('doctor checks: key files are 0600', () => {
  const cases: [string, string][] = [
    ['key_file.vault_keyring', FILES.vault],
    ['key_file.agent_signing_keys', FILES.agent],
    ['key_file.user_signing_keys', FILES.user],
    ['key_file.admin_token', FILES.admin],
    ['key_file.database', FILES.db],
    ['key_file.database', FILES.wal],
  ];
  for (const [id, file] of cases) {
    it(`${id}: 0644 on ${file.slice(DIR.length + 1)} fails naming chmod 600, 0600 passes`, async () => {
      const m = machine();
      expect(byId(await buildDoctorReport(config(), m.deps), id).status).toBe('ok');
      m.files.set(file, { ...m.files.get(file)!, mode: 0o644 });
      const r = await buildDoctorReport(config(), m.deps);
      const c = byId(r, id);
      expect(c.status).toBe('fail');
      expect(c.message).toContain(`chmod 600 ${file}`);
      expect(r.summary.fail).toBe(1);
    });
  }

  it('fails a key file owned by another user', async () => {
    const m = machine();
    m.files.set(FILES.agent, { ...m.files.get(FILES.agent)!, uid: 0 });
    const c = byId(await buildDoctorReport(config(), m.deps), 'key_file.agent_signing_keys');
    expect(c.status).toBe('fail');
    expect(c.message).toContain('owned by uid 0');
  });

  it('warns (does not fail) when a Lite key file is not created yet', async () => {
    const m = machine();
    m.files.delete(FILES.admin);
    const c = byId(await buildDoctorReport(config(), m.deps), 'key_file.admin_token');
    expect(c.status).toBe('warn');
    expect(c.message).toContain('creates it');
  });

  it('fails when LEOFLOW_SECRET_KEYRING_FILE names a missing file', async () => {
    const m = machine({ env: { LEOFLOW_SECRET_KEYRING_FILE: '/etc/lf/keyring.json' } });
    const r = await buildDoctorReport(config(), m.deps);
    const c = byId(r, 'key_file.vault_keyring');
    expect(c.status).toBe('fail');
    expect(c.message).toContain('/etc/lf/keyring.json');
    expect(r.posture.key_storage.vault).toMatchObject({
      source: 'keyring-file',
      file: '/etc/lf/keyring.json',
      older_keys_file: FILES.vault,
    });
  });

  it('checks the agent TLS private key when TLS is configured', async () => {
    const m = machine();
    const cfg = config((c) => {
      c.agent.tls = { certFile: '/etc/lf/cert.pem', keyFile: '/etc/lf/key.pem', caFile: null };
    });
    m.files.set('/etc/lf/cert.pem', { ...m.files.get(FILES.db)!, mode: 0o644 });
    m.files.set('/etc/lf/key.pem', { ...m.files.get(FILES.db)!, mode: 0o640 });
    const r = await buildDoctorReport(cfg, m.deps);
    expect(byId(r, 'key_file.agent_tls_key')).toMatchObject({ status: 'fail' });
    expect(byId(r, 'key_file.agent_tls_key').message).toContain('chmod 600 /etc/lf/key.pem');
    expect(byId(r, 'agent.tls_files').status).toBe('ok');
    m.files.delete('/etc/lf/cert.pem');
    expect(byId(await buildDoctorReport(cfg, m.deps), 'agent.tls_files').status).toBe('fail');
  });
});

describe('doctor checks: vault key source', () => {
  it('fails when both LEOFLOW_SECRET_KEY and LEOFLOW_SECRET_KEYRING_FILE are set', async () => {
    const m = machine({
      env: { LEOFLOW_SECRET_KEY: ENV_KEY, LEOFLOW_SECRET_KEYRING_FILE: FILES.vault },
    });
    const r = await buildDoctorReport(config(), m.deps);
    expect(byId(r, 'vault_key.source').status).toBe('fail');
    expect(JSON.stringify(r)).not.toContain(ENV_KEY);
  });

  it('fails LEOFLOW_SECRET_KEY_PREVIOUS without LEOFLOW_SECRET_KEY', async () => {
    const m = machine({ env: { LEOFLOW_SECRET_KEY_PREVIOUS: ENV_KEY } });
    expect(byId(await buildDoctorReport(config(), m.deps), 'vault_key.source').status).toBe('fail');
  });

  it('fails a malformed key without echoing it', async () => {
    const bad = 'not-a-key-but-a-secret-anyway';
    const r = await buildDoctorReport(config(), machine({ env: { LEOFLOW_SECRET_KEY: bad } }).deps);
    const c = byId(r, 'vault_key.source');
    expect(c.status).toBe('fail');
    expect(c.message).toContain('LEOFLOW_SECRET_KEY');
    expect(JSON.stringify(r)).not.toContain(bad);
  });

  it('passes a valid env key, names the env exposure and the older keyring on disk', async () => {
    const r = await buildDoctorReport(
      config(),
      machine({ env: { LEOFLOW_SECRET_KEY: ENV_KEY } }).deps,
    );
    expect(byId(r, 'vault_key.source')).toMatchObject({ status: 'ok' });
    expect(byId(r, 'key_file.vault_older_keys').status).toBe('ok');
    expect(r.posture.key_storage.vault).toMatchObject({
      source: 'env',
      file: null,
      env_var: 'LEOFLOW_SECRET_KEY',
      older_keys_file: FILES.vault,
    });
    expect(exposureIds(r)).toContain('vault_key.in_environment');
    expect(exposureIds(r)).toContain('vault_key.older_keys_beside_database');
    expect(exposureIds(r)).not.toContain('vault_key.beside_database');
    const all = JSON.stringify(r) + renderDoctorReport(r);
    expect(all).not.toContain(ENV_KEY);
  });

  it('names a keyring file on the same filesystem as the database, not one elsewhere', async () => {
    const m = machine({ env: { LEOFLOW_SECRET_KEYRING_FILE: '/mnt/keys/keyring.json' } });
    m.files.delete(FILES.vault);
    m.files.set('/mnt/keys/keyring.json', { ...m.files.get(FILES.db)! });
    expect(exposureIds(await buildDoctorReport(config(), m.deps))).toContain(
      'vault_key.beside_database',
    );
    m.files.set('/mnt/keys/keyring.json', { ...m.files.get(FILES.db)!, dev: 2 });
    const r = await buildDoctorReport(config(), m.deps);
    expect(exposureIds(r)).not.toContain('vault_key.beside_database');
    expect(byId(r, 'key_file.vault_keyring').status).toBe('ok');
  });

  it('does not call the key beside the database when the database is PostgreSQL', async () => {
    const cfg = config((c) => {
      c.database = { kind: 'postgres', url: 'postgres://lf@db:5432/lf' };
    });
    expect(exposureIds(await buildDoctorReport(cfg, machine().deps))).not.toContain(
      'vault_key.beside_database',
    );
  });
});

describe('doctor checks: datastore', () => {
  it('fails without opening when the SQLite file is missing (opening would create it)', async () => {
    const m = machine();
    m.files.delete(FILES.db);
    m.files.delete(FILES.wal);
    const r = await buildDoctorReport(config(), m.deps);
    const c = byId(r, 'datastore.reachable');
    expect(c.status).toBe('fail');
    expect(c.message).toContain('leoflow standalone');
    expect(m.openStore).not.toHaveBeenCalled();
  });

  it('fails an unreachable database without printing its password', async () => {
    const pw = 'Canary-pg-Pa55';
    const url = `postgres://lf:${pw}@db.internal:5432/lf`;
    const m = machine({ openError: new Error(`connect ECONNREFUSED (while opening ${url})`) });
    const cfg = config((c) => {
      c.database = { kind: 'postgres', url };
    });
    const r = await buildDoctorReport(cfg, m.deps, { databaseUrlSource: 'env' });
    const c = byId(r, 'datastore.reachable');
    expect(c.status).toBe('fail');
    expect(c.message).toContain('ECONNREFUSED');
    expect(c.message).toContain('postgres://lf:***@db.internal:5432/lf');
    expect(r.config.database).toEqual({
      kind: 'postgres',
      url: 'postgres://lf:***@db.internal:5432/lf',
    });
    expect(r.checks.some((k) => k.id === 'datastore.migrations')).toBe(false);
    const all = JSON.stringify(r) + renderDoctorReport(r);
    expect(all).not.toContain(pw);
  });

  it('fails on a pending migration, naming it; passes when all are applied', async () => {
    const m = machine();
    expect(byId(await buildDoctorReport(config(), m.deps), 'datastore.migrations')).toMatchObject({
      status: 'ok',
    });
    m.store.pending = ['0002_vault'];
    const c = byId(await buildDoctorReport(config(), m.deps), 'datastore.migrations');
    expect(c.status).toBe('fail');
    expect(c.message).toContain('0002_vault');
    expect(c.message).toContain('leoflow standalone');
  });

  it('warns when SQLite secure_delete is off; no such check on PostgreSQL', async () => {
    const m = machine();
    expect(byId(await buildDoctorReport(config(), m.deps), 'datastore.secure_delete').status).toBe(
      'ok',
    );
    m.store.secure = 0;
    expect(byId(await buildDoctorReport(config(), m.deps), 'datastore.secure_delete').status).toBe(
      'warn',
    );
    const pg = config((c) => {
      c.database = { kind: 'postgres', url: 'postgres://lf@db/lf' };
    });
    const r = await buildDoctorReport(pg, m.deps);
    expect(byId(r, 'datastore.reachable').status).toBe('ok');
    expect(r.checks.some((k) => k.id === 'datastore.secure_delete')).toBe(false);
    expect(r.checks.some((k) => k.id === 'key_file.database')).toBe(false);
  });
});

describe('doctor checks: agent channel', () => {
  it('fails cleartext on 0.0.0.0: the server refuses secret delivery', async () => {
    const cfg = config((c) => {
      c.agent.host = '0.0.0.0';
    });
    const r = await buildDoctorReport(cfg, machine().deps);
    const c = byId(r, 'agent.channel');
    expect(c.status).toBe('fail');
    expect(c.message).toContain('refuses to deliver');
    expect(c.message).toContain('--agent-tls-cert');
    expect(r.posture.agent_channel).toEqual({
      mode: 'cleartext-non-loopback',
      address: '0.0.0.0:8793',
      secrets_delivered: false,
    });
    expect(renderDoctorReport(r)).toContain('secrets are NOT delivered');
  });

  it('passes cleartext on loopback (naming the local exposure) and TLS anywhere', async () => {
    const loop = await buildDoctorReport(config(), machine().deps);
    expect(byId(loop, 'agent.channel').status).toBe('ok');
    expect(exposureIds(loop)).toContain('agent_channel.cleartext_loopback');

    const m = machine();
    m.files.set('/etc/lf/cert.pem', { ...m.files.get(FILES.db)! });
    m.files.set('/etc/lf/key.pem', { ...m.files.get(FILES.db)! });
    const tls = await buildDoctorReport(
      config((c) => {
        c.agent.host = '0.0.0.0';
        c.agent.tls = { certFile: '/etc/lf/cert.pem', keyFile: '/etc/lf/key.pem', caFile: null };
      }),
      m.deps,
    );
    expect(byId(tls, 'agent.channel').status).toBe('ok');
    expect(tls.posture.agent_channel.mode).toBe('tls');
    expect(exposureIds(tls)).not.toContain('agent_channel.cleartext_loopback');
  });
});

describe('doctor checks: who tasks run as', () => {
  it('not root: warns, and names what task code can read', async () => {
    const m = machine();
    m.texts.set('/proc/sys/kernel/yama/ptrace_scope', '0\n');
    const r = await buildDoctorReport(config(), m.deps);
    expect(byId(r, 'tasks.run_as').status).toBe('warn');
    expect(r.posture.tasks_run_as.isolated).toBe(false);
    const e = r.posture.exposures.find((x) => x.id === 'tasks.same_user');
    expect(e?.sentence).toContain('(uid 1000)');
    expect(e?.sentence).toContain("the agent's memory");
  });

  it('root (defaults): a uid of its own per attempt, with the range, nproc and cgroup posture', async () => {
    const r = await buildDoctorReport(config(), machine({ uid: 0 }).deps);
    expect(byId(r, 'tasks.run_as').status).toBe('ok');
    expect(byId(r, 'tasks.run_as').message).toContain('its own uid and gid');
    expect(byId(r, 'tasks.attempt_uid_range').status).toBe('ok');
    expect(byId(r, 'tasks.nproc_limit')).toMatchObject({ status: 'ok' });
    expect(byId(r, 'tasks.cgroup_limits').status).toBe('warn');
    expect(r.posture.tasks_run_as.isolated).toBe(true);
    expect(r.posture.isolation).toMatchObject({
      mode: 'per-attempt',
      attempt_uid_range: '1879048192-1879113727',
      nproc_limit: { limit: 4096, enforced: true },
      cgroup_limits: { enforced: false },
      work_root: WORK_ROOT,
      task_sdk: { file: SDK, readable: true },
    });
    expect(exposureIds(r)).not.toContain('tasks.same_user');
    expect(exposureIds(r)).not.toContain('tasks.shared_uid');
    expect(renderDoctorReport(r)).toMatch(
      /attempt uids\s+on: a uid and gid of its own per attempt/,
    );
  });

  it('the host agent (execution.host_agent on): ok as root with attempt uids, warn not root, fail with a shared user; off: no check', async () => {
    const on = (c: ServerConfig) => {
      c.subprocess.hostAgent = true;
    };
    const off = await buildDoctorReport(config(), machine({ uid: 0 }).deps);
    expect(off.checks.map((c) => c.id)).not.toContain('tasks.host_agent');
    const root = await buildDoctorReport(config(on), machine({ uid: 0 }).deps);
    expect(byId(root, 'tasks.host_agent').status).toBe('ok');
    expect(byId(root, 'tasks.host_agent').message).toContain('its own uid, token and session');
    const user = await buildDoctorReport(config(on), machine({ uid: 1000 }).deps);
    expect(byId(user, 'tasks.host_agent').status).toBe('warn');
    expect(byId(user, 'tasks.host_agent').message).toContain('runs as this user (uid 1000)');
    expect(byId(user, 'tasks.host_agent').message).toContain("sandbox's fallback");
    const shared = await buildDoctorReport(
      config((c) => {
        on(c);
        c.subprocess.attemptUidRange = null;
      }),
      machine({ uid: 0 }).deps,
    );
    expect(byId(shared, 'tasks.host_agent').status).toBe('fail');
  });

  it('root with a uid range that overlaps an account or group: fails, naming the key', async () => {
    const m = machine({ uid: 0 });
    m.texts.set('/etc/group', 'builders:x:1879048200:\n');
    const r = await buildDoctorReport(config(), m.deps);
    const c = byId(r, 'tasks.attempt_uid_range');
    expect(c.status).toBe('fail');
    expect(c.message).toContain('execution.attempt_uid_range=1879048192-1879113727 overlaps');
    expect(c.message).toContain('builders (1879048200) in /etc/group');
    const bad = await buildDoctorReport(
      config((x) => {
        x.subprocess.attemptUidRange = '5-1';
      }),
      machine({ uid: 0 }).deps,
    );
    expect(byId(bad, 'tasks.attempt_uid_range').message).toContain('execution.attempt_uid_range');
  });

  it('root without prlimit: RLIMIT_NPROC is named as not enforced', async () => {
    const m = machine({ uid: 0 });
    m.files.delete('/usr/bin/prlimit');
    const r = await buildDoctorReport(config(), m.deps);
    expect(byId(r, 'tasks.nproc_limit')).toMatchObject({ status: 'warn' });
    expect(byId(r, 'tasks.nproc_limit').message).toContain('prlimit');
    expect(r.posture.isolation.nproc_limit.enforced).toBe(false);
    expect(renderDoctorReport(r)).toMatch(/process limit\s+NOT enforced/);
  });

  it('an SDK copy closed to other users fails tasks.sdk_reachable', async () => {
    const m = machine({ uid: 0 });
    m.files.set(`${WORK_ROOT}/node_modules`, { mode: 0o700, uid: 0, dev: 1, kind: 'directory' });
    const r = await buildDoctorReport(config(), m.deps);
    expect(byId(r, 'tasks.sdk_reachable').status).toBe('fail');
    expect(r.posture.isolation.task_sdk.readable).toBe(false);
  });

  it('root with the range off and run_as_user nobody: data dir closed, but one uid is shared', async () => {
    const r = await buildDoctorReport(
      config((c) => {
        c.subprocess.attemptUidRange = null;
      }),
      machine({ uid: 0 }).deps,
    );
    expect(byId(r, 'tasks.run_as').status).toBe('ok');
    expect(r.posture.tasks_run_as).toMatchObject({ isolated: true, user: 'nobody', uid: 65534 });
    expect(r.posture.isolation.mode).toBe('shared');
    expect(exposureIds(r)).not.toContain('tasks.same_user');
    const e = r.posture.exposures.find((x) => x.id === 'tasks.shared_uid');
    expect(e?.sentence).toContain('/proc/<pid>/environ');
  });

  it('root with the range off and --run-as-user none, or a uid-0 account: not isolated', async () => {
    const none = await buildDoctorReport(
      config((c) => {
        c.subprocess.attemptUidRange = null;
        c.subprocess.runAsUser = null;
      }),
      machine({ uid: 0 }).deps,
    );
    expect(byId(none, 'tasks.run_as').status).toBe('warn');
    expect(exposureIds(none)).toContain('tasks.same_user');
    const asRoot = await buildDoctorReport(
      config((c) => {
        c.subprocess.attemptUidRange = null;
        c.subprocess.runAsUser = 'root';
      }),
      machine({ uid: 0 }).deps,
    );
    expect(byId(asRoot, 'tasks.run_as').status).toBe('warn');
    expect(asRoot.posture.tasks_run_as.isolated).toBe(false);
  });

  it('root with the range off and an account that does not exist: fails (standalone would not start)', async () => {
    const r = await buildDoctorReport(
      config((c) => {
        c.subprocess.attemptUidRange = null;
        c.subprocess.runAsUser = 'ghost';
      }),
      machine({ uid: 0 }).deps,
    );
    const c = byId(r, 'tasks.run_as');
    expect(c.status).toBe('fail');
    expect(c.message).toContain('useradd --system ghost');
  });
});

describe('doctor exposures: credential settings and listeners', () => {
  it('scoping: permissive and off are exposures, enforce is not', async () => {
    const at = async (mode: 'permissive' | 'enforce' | 'off') =>
      exposureIds(
        await buildDoctorReport(
          config((c) => {
            c.credentials.secretScoping = mode;
          }),
          machine().deps,
        ),
      ).filter((id) => id.startsWith('secret_scoping.'));
    expect(await at('permissive')).toEqual(['secret_scoping.permissive']);
    expect(await at('off')).toEqual(['secret_scoping.off']);
    expect(await at('enforce')).toEqual([]);
  });

  it('liveness: observe is an exposure naming the token TTL, enforce is not', async () => {
    const observe = await buildDoctorReport(
      config((c) => {
        c.credentials.secretLivenessMode = 'observe';
      }),
      machine().deps,
    );
    expect(
      observe.posture.exposures.find((e) => e.id === 'secret_liveness.observe')?.sentence,
    ).toContain('up to 10m');
    expect(exposureIds(await buildDoctorReport(config(), machine().deps))).not.toContain(
      'secret_liveness.observe',
    );
    const enforce = await buildDoctorReport(
      config((c) => {
        c.credentials.secretLivenessMode = 'enforce';
      }),
      machine().deps,
    );
    expect(exposureIds(enforce)).not.toContain('secret_liveness.observe');
  });

  it('a disabled renewal ceiling is an exposure', async () => {
    const r = await buildDoctorReport(
      config((c) => {
        c.credentials.maxAttemptCredentialLifetimeSeconds = 0;
      }),
      machine().deps,
    );
    expect(exposureIds(r)).toContain('credential_lifetime.unbounded');
    expect(r.posture.max_attempt_credential_lifetime).toBe('disabled');
  });

  it('an admin token with an exp claim is not an exposure', async () => {
    const m = machine();
    m.texts.set(FILES.admin, jwt({ sub: 'admin', exp: 2_000_000_000 }));
    const r = await buildDoctorReport(config(), m.deps);
    expect(exposureIds(r)).not.toContain('admin_token.no_expiry');
    expect(r.posture.key_storage.admin_token.expires).toBe(true);
  });

  it('REST API and metrics on a non-loopback address are exposures', async () => {
    const r = await buildDoctorReport(
      config((c) => {
        c.http.host = '0.0.0.0';
        c.metrics.host = '0.0.0.0';
      }),
      machine().deps,
    );
    expect(exposureIds(r)).toEqual(
      expect.arrayContaining(['http.cleartext_non_loopback', 'metrics.non_loopback']),
    );
    const local = exposureIds(await buildDoctorReport(config(), machine().deps));
    expect(local).not.toContain('http.cleartext_non_loopback');
    expect(local).not.toContain('metrics.non_loopback');
  });

  it('a database password on the command line or in the environment is an exposure', async () => {
    const cfg = (url: string) =>
      config((c) => {
        c.database = { kind: 'postgres', url };
      });
    const withPw = 'postgres://lf:pw-canary@db/lf';
    const flag = await buildDoctorReport(cfg(withPw), machine().deps, {
      databaseUrlSource: 'flag',
    });
    expect(exposureIds(flag)).toContain('database_url.password_on_command_line');
    const env = await buildDoctorReport(cfg(withPw), machine().deps, { databaseUrlSource: 'env' });
    expect(exposureIds(env)).toContain('database_url.password_in_environment');
    const none = await buildDoctorReport(cfg('postgres://lf@db/lf'), machine().deps, {
      databaseUrlSource: 'flag',
    });
    expect(exposureIds(none).filter((id) => id.startsWith('database_url.'))).toEqual([]);
    for (const r of [flag, env]) {
      expect(JSON.stringify(r) + renderDoctorReport(r)).not.toContain('pw-canary');
    }
  });

  it('a missing DAGs folder warns', async () => {
    const cfg = config((c) => {
      c.dagsFolder = '/srv/dags';
    });
    const m = machine();
    expect(byId(await buildDoctorReport(cfg, m.deps), 'dags_folder.exists').status).toBe('warn');
    m.files.set('/srv/dags', { ...m.files.get(DIR)! });
    expect(byId(await buildDoctorReport(cfg, m.deps), 'dags_folder.exists').status).toBe('ok');
  });
});

describe('doctor redaction and rendering', () => {
  it('redacts the URL password and password-like parameters', () => {
    expect(redactDatabaseUrl('postgres://u:p%40ss@h:5432/d')).toBe('postgres://u:***@h:5432/d');
    expect(redactDatabaseUrl('postgres://u@h/d?password=x&sslkey=/k&application_name=a')).toBe(
      'postgres://u@h/d?password=***&sslkey=***&application_name=a',
    );
    expect(redactDatabaseUrl('postgres://u@h/d')).toBe('postgres://u@h/d');
    expect(redactDatabaseUrl('::not a url::')).not.toContain('not a url');
    expect(scrub('a p@ss b p%40ss', ['p@ss', 'p%40ss'])).toBe('a *** b ***');
  });

  it('renders one screen with every section, each exposure and each check', async () => {
    const m = machine();
    m.files.set(FILES.user, { ...m.files.get(FILES.user)!, mode: 0o644 });
    const r = await buildDoctorReport(config(), m.deps);
    const text = renderDoctorReport(r);
    for (const heading of [
      'Configuration',
      'Credential plane',
      'Task isolation',
      'Residual exposure',
      'Checks',
    ]) {
      expect(text).toContain(`\n${heading}\n`);
    }
    for (const c of r.checks) expect(text).toContain(c.id);
    for (const e of r.posture.exposures) expect(text).toContain(e.sentence);
    expect(text).toContain('inherited pipe fd 3, memory only');
    expect(text).toMatch(/fail\s+key_file\.user_signing_keys/);
    expect(text).toContain('1 fail');
    expect(text.split('\n').length).toBeLessThan(75);
  });
});

describe('doctor report: undeclared runtime use (D5)', () => {
  it('lists per DAG the names tasks read without declaring them, and is ok when there are none', async () => {
    const m = machine();
    const seen: string[] = [];
    const withUse = (rows: Awaited<ReturnType<NonNullable<DoctorStore['undeclaredUse']>>>) => {
      const s = m.store as DoctorStore;
      s.undeclaredUse = (tenant) => {
        seen.push(tenant);
        return Promise.resolve(rows);
      };
    };
    withUse([
      {
        dag_id: 'etl',
        variables: ['api_key'],
        connections: ['warehouse'],
        attempts: 2,
        last_seen: 1,
      },
      { dag_id: 'report', variables: [], connections: ['smtp'], attempts: 1, last_seen: 1 },
    ]);
    const r = await buildDoctorReport(config(), m.deps);
    const c = byId(r, 'secrets.undeclared_use');
    expect(c.status).toBe('warn');
    expect(c.message).toContain(
      'etl (variables api_key; connections warehouse), report (connections smtp)',
    );
    expect(c.message).toContain('secret_scoping=enforce would withhold them');
    expect(seen).toEqual(['default']);
    withUse([]);
    const clean = await buildDoctorReport(config(), m.deps);
    expect(byId(clean, 'secrets.undeclared_use').status).toBe('ok');
  });
});
