import type { Command } from 'commander';
import { ApiClient, CliError } from '../client.js';
import { globalOpts } from '../global-options.js';
import { parseOutput, print } from '../output.js';

const COLUMNS = ['name', 'kind', 'capacity', 'labels', 'has_token', 'created_at'];

interface RegisterFlags {
  kind?: string;
  labels?: string;
  capacity?: string;
  host?: string;
  port?: string;
  user?: string;
  credential?: string;
  hostKey?: string;
}

/** `k=v,k2=v2` → { k: 'v', k2: 'v2' }; the server checks the characters. */
export function parseLabels(s: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of s.split(',')) {
    if (part.trim() === '') continue;
    const eq = part.indexOf('=');
    if (eq <= 0) throw new CliError(`--labels: "${part}" is not key=value`, 2, 'LF_USAGE');
    out[part.slice(0, eq).trim()] = part.slice(eq + 1).trim();
  }
  return out;
}

function wholeNumber(v: string, flag: string): number {
  if (!/^\d+$/.test(v))
    throw new CliError(`${flag} must be a whole number (got "${v}")`, 2, 'LF_USAGE');
  return Number(v);
}

/** The request body for `runners register`, or a usage error (exit 2) before any request. */
export function registerBody(name: string, f: RegisterFlags): Record<string, unknown> {
  if (f.kind !== 'inbound' && f.kind !== 'ssh') {
    throw new CliError(
      f.kind === undefined
        ? '--kind is required: inbound or ssh'
        : `--kind must be inbound or ssh (got "${f.kind}")`,
      2,
      'LF_USAGE',
    );
  }
  const sshFlags = { host: f.host, user: f.user, credential: f.credential, hostKey: f.hostKey };
  const given = Object.entries(sshFlags).filter(([, v]) => v !== undefined);
  const body: Record<string, unknown> = { name, kind: f.kind };
  if (f.labels !== undefined) body.labels = parseLabels(f.labels);
  if (f.capacity !== undefined) body.capacity = wholeNumber(f.capacity, '--capacity');
  if (f.kind === 'inbound') {
    if (given.length > 0 || f.port !== undefined) {
      throw new CliError(
        '--host, --port, --user, --credential and --host-key are for --kind ssh',
        2,
        'LF_USAGE',
      );
    }
    return body;
  }
  const missing = Object.entries(sshFlags)
    .filter(([, v]) => v === undefined)
    .map(([k]) => (k === 'hostKey' ? '--host-key' : `--${k}`));
  if (missing.length > 0) {
    throw new CliError(
      `an ssh runner needs ${missing.join(', ')} (the host key is pinned: \`ssh-keyscan <host>\` or a SHA256: fingerprint)`,
      2,
      'LF_USAGE',
    );
  }
  body.ssh = {
    host: f.host,
    user: f.user,
    credential: f.credential,
    host_key: f.hostKey,
    ...(f.port !== undefined ? { port: wholeNumber(f.port, '--port') } : {}),
  };
  return body;
}

interface Registered {
  runner: Record<string, unknown>;
  token: string | null;
  door_url: string | null;
  launch_command: string | null;
}

export function registerRunners(program: Command): void {
  const runners = program
    .command('runners')
    .description("external machines that run the tenant's attempts (docs/runners.md)");

  runners
    .command('register <name>')
    .description(
      'register a runner; an inbound one prints its launch command (the only thing the machine needs) on stdout',
    )
    // checked in registerBody, so a missing <name> is reported first
    .option(
      '--kind <kind>',
      'required: inbound (connects in through the door) or ssh (the cell dials it)',
    )
    .option('--labels <k=v,...>', 'labels tasks select runners by')
    .option('--capacity <n>', 'attempts it runs at once (default 1)')
    .option('--host <host>', 'ssh: the machine to dial')
    .option('--port <port>', 'ssh: its port (default 22)')
    .option('--user <user>', 'ssh: the account to log in as')
    .option('--credential <connection id>', 'ssh: the Connection holding the private key')
    .option(
      '--host-key <key>',
      'ssh: the pinned host key (known_hosts line or SHA256: fingerprint)',
    )
    .action(async (name: string, flags: RegisterFlags, cmd: Command) => {
      const g = globalOpts(cmd);
      const format = parseOutput(g.output);
      const body = registerBody(name, flags);
      const res = await new ApiClient(g).request<Registered>('POST', '/api/v1/runners', body);
      if (format !== 'table') {
        print(format, res);
        return;
      }
      if (res.launch_command !== null) {
        // stdout holds exactly the command, so `cmd=$(leoflow runners register …)` captures it
        process.stdout.write(`${res.launch_command}\n`);
        process.stderr.write(
          `runner ${name} registered. Run the command above on the machine; it carries the runner's token ` +
            '(a password: keep it out of chat and tickets). `leoflow runners get ' +
            `${name} --show-token\` prints it again.\n`,
        );
        return;
      }
      if (res.token !== null) {
        process.stdout.write(`${res.token}\n`);
        process.stderr.write(
          `runner ${name} registered; this server has no door URL configured (--door-port / --door-url), so only the token is printed.\n`,
        );
        return;
      }
      print(format, res.runner, { rows: [res.runner], columns: COLUMNS });
    });

  runners
    .command('list')
    .description("the tenant's runners (never their tokens)")
    .action(async (_f: unknown, cmd: Command) => {
      const g = globalOpts(cmd);
      const rows = await new ApiClient(g).listAll<Record<string, unknown>>(
        '/api/v1/runners',
        'runners',
      );
      print(parseOutput(g.output), { runners: rows }, { rows, columns: COLUMNS });
    });

  runners
    .command('get <name>')
    .description(
      'one runner; --show-token prints its launch command again (needs runners:create; audited)',
    )
    .option('--show-token', 'read the token and launch command again')
    .action(async (name: string, flags: { showToken?: boolean }, cmd: Command) => {
      const g = globalOpts(cmd);
      const client = new ApiClient(g);
      const format = parseOutput(g.output);
      const path = `/api/v1/runners/${encodeURIComponent(name)}`;
      if (flags.showToken === true) {
        const t = await client.request<Record<string, unknown>>('POST', `${path}/reveal-token`);
        if (format === 'table') {
          process.stdout.write(`${String(t.launch_command ?? t.token)}\n`);
          return;
        }
        print(format, t);
        return;
      }
      const r = await client.request<Record<string, unknown>>('GET', path);
      print(format, r, { rows: [r], columns: [...COLUMNS, 'ssh'] });
    });

  runners
    .command('delete <name>')
    .description(
      'delete a runner: its token stops working at once and its sessions close (re-register to rotate)',
    )
    .action(async (name: string, _f: unknown, cmd: Command) => {
      const g = globalOpts(cmd);
      const r = await new ApiClient(g).request<Record<string, unknown>>(
        'DELETE',
        `/api/v1/runners/${encodeURIComponent(name)}`,
      );
      print(parseOutput(g.output), r, { rows: [{ deleted: name }], columns: ['deleted'] });
    });
}
