import { readFileSync, writeFileSync } from 'node:fs';
import { extname } from 'node:path';
import type { Command } from 'commander';
import {
  formatAirflowConnectionsExport,
  fromAirflowEnv,
  jsonNestingDepth,
  MAX_JSON_DEPTH,
  parseAirflowConnectionsExport,
  parseConnectionJson,
  parseConnectionUri,
  requireConnType,
  type Connection,
} from '@leoflow/core';
import { ApiClient, CliError } from '../client.js';
import { globalOpts } from '../global-options.js';
import { parseOutput, print } from '../output.js';
import { registerGrantCommands } from './grants.js';

const COLUMNS = [
  'conn_id',
  'conn_type',
  'host',
  'port',
  'login',
  'schema',
  'has_password',
  'updated_at',
];

interface SetFlags {
  uri?: string;
  json?: string;
  connType?: string;
  host?: string;
  login?: string;
  password?: string;
  passwordStdin?: boolean;
  passwordFile?: string;
  schema?: string;
  port?: string;
  extra?: string;
  description?: string;
}

const PASSWORD_SOURCES = '--password-stdin, --password-file or --password';

/** One trailing line break (what `echo` and editors add) is not part of the password. */
function withoutFinalNewline(s: string): string {
  return s.replace(/\r?\n$/, '');
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * The password from --password-stdin, --password-file or --password (at most one). The first two
 * keep it out of argv, where `ps` and shell history would show it.
 */
async function passwordFromFlags(f: SetFlags): Promise<string | undefined> {
  const given = [f.password !== undefined, f.passwordStdin === true, f.passwordFile !== undefined];
  if (given.filter(Boolean).length > 1) {
    throw new CliError(`give only one of ${PASSWORD_SOURCES}`, 2, 'LF_USAGE');
  }
  let password: string;
  if (f.passwordFile !== undefined) {
    try {
      password = withoutFinalNewline(readFileSync(f.passwordFile, 'utf8'));
    } catch (err) {
      throw new CliError(
        `--password-file ${f.passwordFile} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
        2,
        'LF_USAGE',
      );
    }
    if (password === '')
      throw new CliError(`--password-file ${f.passwordFile} is empty`, 2, 'LF_USAGE');
  } else if (f.passwordStdin === true) {
    if (process.stdin.isTTY) {
      throw new CliError(
        '--password-stdin reads the password from a pipe or file, e.g. printf \'%s\' "$PW" | leoflow connections set …',
        2,
        'LF_USAGE',
      );
    }
    password = withoutFinalNewline(await readStdin());
    if (password === '')
      throw new CliError('--password-stdin: standard input is empty', 2, 'LF_USAGE');
  } else if (f.password !== undefined) {
    process.stderr.write(
      'warning: --password puts the password in the command line, where ps and shell history show it; ' +
        'prefer --password-stdin or --password-file\n',
    );
    password = f.password;
  } else {
    return undefined;
  }
  return password;
}

/**
 * A URI or JSON connection given with a separate password is parsed here and sent as fields.
 * It must not carry a password itself: two passwords is a mistake, not a precedence question.
 */
function withPassword(conn: Connection, password: string, form: '--uri' | '--json'): Connection {
  if (conn.password !== null) {
    throw new CliError(
      `the ${form} connection already carries a password; remove it from there and keep ${PASSWORD_SOURCES}, or drop the flag`,
      2,
      'LF_USAGE',
    );
  }
  return { ...conn, password };
}

async function bodyFromFlags(f: SetFlags): Promise<Record<string, unknown>> {
  const modes = [f.uri !== undefined, f.json !== undefined, f.connType !== undefined].filter(
    Boolean,
  ).length;
  if (modes !== 1) {
    throw new CliError(
      'give exactly one of --uri, --json or --conn-type (with --host, --login, … )',
      2,
      'LF_USAGE',
    );
  }
  const description = f.description !== undefined ? { description: f.description } : {};
  const password = await passwordFromFlags(f);
  if (password !== undefined && f.uri !== undefined) {
    return {
      connection: withPassword(parseConnectionUri(f.uri), password, '--uri'),
      ...description,
    };
  }
  if (password !== undefined && f.json !== undefined) {
    const conn = requireConnType(parseConnectionJson(f.json));
    return { connection: withPassword(conn, password, '--json'), ...description };
  }
  if (f.uri !== undefined) return { uri: f.uri, ...description };
  if (f.json !== undefined) return { json: f.json, ...description };
  let extra: unknown = null;
  if (f.extra !== undefined) {
    if (jsonNestingDepth(f.extra) > MAX_JSON_DEPTH) {
      throw new CliError(
        `--extra nests objects/arrays more than ${MAX_JSON_DEPTH} deep; the server refuses it`,
        2,
        'LF_JSON_TOO_DEEP',
      );
    }
    try {
      extra = JSON.parse(f.extra);
    } catch {
      throw new CliError(
        '--extra must be a JSON object, e.g. --extra \'{"sslmode":"require"}\'',
        2,
        'LF_USAGE',
      );
    }
  }
  const port = f.port === undefined ? null : Number(f.port);
  if (port !== null && (!Number.isInteger(port) || port < 0 || port > 65535)) {
    throw new CliError('--port must be a number 0-65535', 2, 'LF_USAGE');
  }
  return {
    connection: {
      conn_type: f.connType,
      host: f.host ?? null,
      login: f.login ?? null,
      password: password ?? null,
      schema: f.schema ?? null,
      port,
      extra,
    },
    ...description,
  };
}

export function registerConnections(program: Command): void {
  const conns = program
    .command('connections')
    .description('Connections: what tasks receive as AIRFLOW_CONN_<ID>');

  conns
    .command('set <conn_id>')
    .description('create or replace a connection from an Airflow URI, Airflow JSON, or fields')
    .option('--uri <uri>', 'Airflow connection URI, e.g. postgres://user:pass@host:5432/db')
    .option('--json <json>', 'Airflow connection JSON')
    .option(
      '--conn-type <type>',
      'connection type (then --host, --login, --password, --schema, --port, --extra)',
    )
    .option('--host <host>')
    .option('--login <login>')
    .option(
      '--password-stdin',
      'read the password from standard input (one trailing newline is dropped); with --conn-type, or with a --uri/--json that has no password',
    )
    .option(
      '--password-file <file>',
      'read the password from a file (one trailing newline is dropped); like --password-stdin',
    )
    .option(
      '--password <password>',
      'the password in argv, where ps and shell history show it: prefer --password-stdin or --password-file',
    )
    .option('--schema <schema>')
    .option('--port <port>')
    .option('--extra <json>', 'extra fields as a JSON object')
    .option('--description <text>')
    .action(async (id: string, flags: SetFlags, cmd: Command) => {
      const g = globalOpts(cmd);
      const res = await new ApiClient(g).request<Record<string, unknown>>(
        'PUT',
        `/api/v1/connections/${encodeURIComponent(id)}`,
        await bodyFromFlags(flags),
      );
      print(parseOutput(g.output), res, { rows: [res], columns: COLUMNS });
    });

  conns
    .command('get <conn_id>')
    .description(
      'show a connection (never its password; extra values masked but for a few non-secret fields); --reveal shows all (admin; audited)',
    )
    .option('--reveal', 'include the password and secret extras (admin only; audited)')
    .action(async (id: string, flags: { reveal?: boolean }, cmd: Command) => {
      const g = globalOpts(cmd);
      const client = new ApiClient(g);
      const path = `/api/v1/connections/${encodeURIComponent(id)}`;
      const res = flags.reveal
        ? await client.request<Record<string, unknown>>('POST', `${path}/reveal`)
        : await client.request<Record<string, unknown>>('GET', path);
      print(
        parseOutput(g.output),
        res,
        flags.reveal ? undefined : { rows: [res], columns: [...COLUMNS, 'extra'] },
      );
    });

  conns
    .command('list')
    .description('list connections (metadata only)')
    .action(async (_f: unknown, cmd: Command) => {
      const g = globalOpts(cmd);
      const connections = await new ApiClient(g).listAll<Record<string, unknown>>(
        '/api/v1/connections',
        'connections',
      );
      const res = { connections };
      print(parseOutput(g.output), res, { rows: res.connections, columns: COLUMNS });
    });

  conns
    .command('delete <conn_id>')
    .description('delete a connection; tasks that declared it stop receiving it')
    .action(async (id: string, _f: unknown, cmd: Command) => {
      const g = globalOpts(cmd);
      await new ApiClient(g).request('DELETE', `/api/v1/connections/${encodeURIComponent(id)}`);
      print(
        parseOutput(g.output),
        { deleted: id },
        { rows: [{ deleted: id }], columns: ['deleted'] },
      );
    });

  conns
    .command('test <conn_id>')
    .description(
      'structural checks for the connection type (no network call from the control plane)',
    )
    .action(async (id: string, _f: unknown, cmd: Command) => {
      const g = globalOpts(cmd);
      const res = await new ApiClient(g).request<{
        ok: boolean;
        checks: { name: string; ok: boolean; message: string }[];
      }>('POST', `/api/v1/connections/${encodeURIComponent(id)}/test`);
      const format = parseOutput(g.output);
      if (format === 'table') {
        for (const c of res.checks)
          process.stdout.write(`${c.ok ? '✔' : '✘'} ${c.name}: ${c.message}\n`);
        process.stdout.write(res.ok ? `${id}: ok\n` : `${id}: problems found\n`);
      } else print(format, res);
      if (!res.ok) process.exitCode = 1;
    });

  conns
    .command('import [file]')
    .description(
      'import `airflow connections export` output (.json, .yaml, .env), or AIRFLOW_CONN_* with --from-env',
    )
    .option('--format <format>', 'json, yaml or env (default: from the file extension)')
    .option('--from-env', 'take AIRFLOW_CONN_* from this shell (local development)')
    .action(
      async (
        file: string | undefined,
        flags: { format?: string; fromEnv?: boolean },
        cmd: Command,
      ) => {
        const g = globalOpts(cmd);
        let entries: { id: string; conn: Connection }[];
        if (flags.fromEnv) entries = fromAirflowEnv(process.env).connections;
        else if (file)
          entries = parseAirflowConnectionsExport(
            readFileSync(file, 'utf8'),
            importFormat(file, flags.format),
          );
        else
          throw new CliError(
            'give a file (airflow connections export output) or --from-env',
            2,
            'LF_USAGE',
          );
        const res = await new ApiClient(g).request<{ imported: number }>(
          'POST',
          '/api/v1/connections/import',
          {
            connections: entries.map((e) => ({ conn_id: e.id, connection: e.conn })),
          },
        );
        print(parseOutput(g.output), res, { rows: [res], columns: ['imported'] });
      },
    );

  conns
    .command('export <file>')
    .description(
      'write every connection, secrets included, as `airflow connections export` would (admin; audited)',
    )
    .option('--format <format>', 'json, yaml or env (default: from the file extension)')
    .action(async (file: string, flags: { format?: string }, cmd: Command) => {
      const g = globalOpts(cmd);
      const res = await new ApiClient(g).request<{ connections: Record<string, Connection> }>(
        'POST',
        '/api/v1/connections/export',
      );
      const format = importFormat(file, flags.format);
      // Airflow's own layout (checked against Airflow by the differential oracle).
      const text = formatAirflowConnectionsExport(res.connections, format);
      writeFileSync(file, text, { mode: 0o600 });
      const out = { exported: Object.keys(res.connections).length, file };
      print(parseOutput(g.output), out, { rows: [out], columns: ['exported', 'file'] });
    });

  registerGrantCommands(conns, 'connections', 'conn_id');
}

function importFormat(file: string, given?: string): 'json' | 'yaml' | 'env' {
  const f =
    given ??
    ({ '.json': 'json', '.yaml': 'yaml', '.yml': 'yaml', '.env': 'env' } as Record<string, string>)[
      extname(file)
    ];
  if (f === 'json' || f === 'yaml' || f === 'env') return f;
  throw new CliError('cannot tell the file format; pass --format json|yaml|env', 2, 'LF_USAGE');
}
