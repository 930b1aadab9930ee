import type { DoctorReport, KeyFilePosture } from './types.js';

/** `leoflow doctor`'s one screen: configuration, credential plane, exposures, checks. */
export function renderDoctorReport(r: DoctorReport): string {
  const c = r.config;
  const p = r.posture;
  const out: string[] = [];
  const section = (title: string, rows: [string, string][]) => {
    const width = Math.max(...rows.map(([k]) => k.length));
    out.push(title, ...rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`), '');
  };

  out.push(`Leoflow doctor: Lite control plane, data dir ${c.data_dir}`, '');
  section('Configuration', configurationRows(r));

  section('Credential plane', credentialPlaneRows(p));

  section('Task isolation', isolationRows(p.isolation));

  if (p.sandbox) section('Attempt sandbox', sandboxRows(p.sandbox));

  if (r.settings) {
    // Every setting, so an operator sees which value came from where (default, file, env, flag).
    const width = Math.max(...r.settings.map((x) => x.key.length));
    out.push('Settings (value, and where it came from)');
    for (const x of r.settings) {
      out.push(
        `  ${x.key.padEnd(width)}  ${x.value}${x.source === 'default' ? '' : `  [${x.source}]`}`,
      );
    }
    out.push('');
  }

  out.push('Residual exposure');
  if (p.exposures.length === 0) out.push('  (none found)');
  for (const e of p.exposures) out.push(`  - ${e.sentence}`, `    fix: ${e.remedy}`);
  out.push('');

  out.push('Checks');
  const idWidth = Math.max(...r.checks.map((k) => k.id.length), 2);
  for (const k of r.checks)
    out.push(`  ${k.status.padEnd(4)}  ${k.id.padEnd(idWidth)}  ${k.message}`);
  out.push('');
  const s = r.summary;
  out.push(
    `${s.ok} ok, ${s.warn} warn, ${s.fail} fail` +
      (s.fail > 0 ? ': fix the failing checks above' : ''),
    '',
  );
  return out.join('\n');
}

function fileWithMode(f: KeyFilePosture): string {
  return `${f.file} (${f.mode ?? 'missing'})`;
}

function configurationRows(r: DoctorReport): [string, string][] {
  const c = r.config;
  const p = r.posture;
  return [
    [
      'database',
      c.database.kind === 'sqlite'
        ? `sqlite ${c.database.file}`
        : `postgres ${c.database.url}${c.database.schema ? ` (schema ${c.database.schema})` : ''}`,
    ],
    ['REST API', `${c.http.host}:${c.http.port}`],
    [
      'agent RPC',
      `${c.agent.host}:${c.agent.port}${c.agent.tls ? `, TLS (${c.agent.tls.cert_file})` : ', cleartext'}`,
    ],
    ['metrics', c.metrics.port === null ? 'disabled' : `${c.metrics.host}:${c.metrics.port}`],
    ['DAGs folder', c.dags_folder ?? '-'],
    [
      'timing',
      `heartbeat ${c.execution.heartbeat_interval}, agent lost ${c.execution.agent_lost_threshold}, dispatch lost ${c.execution.dispatch_lost_threshold}`,
    ],
    [
      'execution',
      `attempt uids ${c.execution.attempt_uid_range ?? 'off'} (nproc ${c.execution.attempt_nproc_limit}), run-as user ${c.execution.run_as_user ?? 'none'}, ${c.execution.standby_agents} standby agent(s), work dir ${c.execution.work_dir ?? p.isolation.work_root ?? '(per install, not created yet)'}`,
    ],
    ['vault seed', c.vault_seed_dir ?? '-'],
    ['log level', c.log_level],
  ];
}

function credentialPlaneRows(p: DoctorReport['posture']): [string, string][] {
  const ks = p.key_storage;
  const vault =
    ks.vault.source === 'env'
      ? `environment (${ks.vault.env_var ?? 'LEOFLOW_SECRET_KEY'})`
      : `keyring file ${fileWithMode({ file: ks.vault.file ?? '', mode: ks.vault.mode })}`;
  return [
    ['secret scoping', p.secret_scoping],
    ['liveness', p.secret_liveness_mode],
    [
      'attempt token',
      `TTL ${p.attempt_token_ttl}, renewed on heartbeat; renewal ceiling ${p.max_attempt_credential_lifetime}`,
    ],
    [
      'token transport',
      `subprocess: ${p.token_transport.subprocess}; kubernetes: ${p.token_transport.kubernetes}`,
    ],
    [
      'vault key',
      vault + (ks.vault.older_keys_file ? `; older keys in ${ks.vault.older_keys_file}` : ''),
    ],
    [
      'signing keys',
      `agent ${fileWithMode(ks.agent_signing)}, user ${fileWithMode(ks.user_signing)}`,
    ],
    [
      'admin token',
      `${fileWithMode(ks.admin_token)}${ks.admin_token.expires === true ? '' : ', no expiry'}`,
    ],
    [
      'agent channel',
      p.agent_channel.mode === 'tls'
        ? `TLS on ${p.agent_channel.address}`
        : p.agent_channel.mode === 'cleartext-loopback'
          ? `cleartext on loopback (${p.agent_channel.address})`
          : `cleartext on ${p.agent_channel.address}, not loopback: secrets are NOT delivered`,
    ],
    ['tasks run as', p.tasks_run_as.summary],
  ];
}

function isolationRows(iso: DoctorReport['posture']['isolation']): [string, string][] {
  return [
    [
      'attempt uids',
      iso.mode === 'per-attempt'
        ? `on: a uid and gid of its own per attempt from ${iso.attempt_uid_range ?? '?'}, no supplementary groups, every process of it killed at the attempt's end`
        : iso.mode === 'shared'
          ? "off: every attempt shares one uid (tasks can read each other's environ and signal each other)"
          : "off: not root, every attempt runs as this user (tasks can read each other's environ and the data dir)",
    ],
    [
      'process limit',
      `${iso.nproc_limit.enforced ? 'enforced' : 'NOT enforced'}: ${iso.nproc_limit.detail}`,
    ],
    [
      'cgroup limits',
      `${iso.cgroup_limits.enforced ? 'enforced' : 'NOT enforced'}: ${iso.cgroup_limits.detail.replace(/^not enforced: /, '')}`,
    ],
    ['work root', iso.work_root ?? '(per install; created at first start)'],
    [
      'task SDK',
      iso.task_sdk.file === null
        ? '-'
        : `${iso.task_sdk.file} (${iso.task_sdk.readable === null ? 'missing' : iso.task_sdk.readable ? 'readable by task uids' : 'NOT readable by task uids'})`,
    ],
  ];
}

function sandboxRows(sb: NonNullable<DoctorReport['posture']['sandbox']>): [string, string][] {
  return [
    [
      'in force',
      sb.mode === 'namespaces'
        ? `namespaces (mount, IPC, PID, UTS${sb.network === 'none' ? ', network' : ''}), execution.isolation ${sb.isolation}`
        : sb.mode === 'uid'
          ? `PER-UID FALLBACK (no namespaces): ${sb.why ?? ''}`
          : sb.mode === 'none'
            ? 'NONE: not root — no per-attempt uids, no namespaces'
            : `refused: ${sb.why ?? ''}`,
    ],
    ['network', sb.network === 'none' ? 'none (an empty namespace per attempt)' : 'host'],
    ['private dirs', sb.world_writable.join(', ') || '-'],
    ['Landlock', sb.landlock ? 'abstract unix sockets and signals scoped' : 'not available'],
    ['helper', sb.helper ?? 'NOT BUILT (no C compiler at build time)'],
  ];
}
