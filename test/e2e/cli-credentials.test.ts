import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, scratchDir, startStandalone, type Standalone } from '../support/processes.js';

// Section 3 of issue 11, against the real CLI process: the local admin.token never leaves for
// a non-loopback URL, and `connections set` takes a password from stdin or a file.

let scratch: ReturnType<typeof scratchDir>;
let sa: Standalone;
/** No profile, no LEOFLOW_TOKEN: the only token at hand is the standalone's admin.token. */
let env: Record<string, string>;

beforeAll(async () => {
  scratch = scratchDir('leoflow-cli-credentials-');
  sa = await startStandalone({ dataDir: join(scratch.dir, 'data') });
  env = {
    LEOFLOW_CLI_CONFIG: join(scratch.dir, 'cli-config.yaml'),
    LEOFLOW_URL: '',
    LEOFLOW_TOKEN: '',
    LEOFLOW_PROFILE: '',
    LEOFLOW_DATA_DIR: sa.dataDir,
  };
});
afterAll(async () => {
  await sa?.stop();
  scratch?.cleanup();
});

/** The real CLI with `input` on its standard input. */
const cliWithInput = (args: string[], env: Record<string, string>, input: string) =>
  cli(args, env, 60_000, input);

/** This machine's first non-loopback IPv4 address, if it has one. */
function externalIPv4(): string | undefined {
  for (const addrs of Object.values(networkInterfaces())) {
    for (const a of addrs ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return undefined;
}

describe('the local admin.token stays on loopback', () => {
  it('a loopback URL still gets it (no token given anywhere else)', async () => {
    const res = await cli(['dags', 'list', '-o', 'json'], { ...env, LEOFLOW_URL: sa.url });
    expect(res.code, res.stderr).toBe(0);
    expect(JSON.parse(res.stdout)).toMatchObject({ dags: [] });
  });

  it('a name that is not loopback: refused before any network I/O, saying why and how', async () => {
    // An .invalid name never resolves: had the CLI tried, it would say "cannot reach".
    const res = await cli(['dags', 'list'], { ...env, LEOFLOW_URL: 'http://leoflow.invalid:8080' });
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(/not sending the local standalone's admin token/);
    expect(res.stderr).toMatch(/not a loopback address/);
    expect(res.stderr).toMatch(/--token <token>, LEOFLOW_TOKEN=<token>, or a profile/);
    expect(res.stderr).not.toContain('cannot reach');
    expect(res.stderr).not.toContain(sa.token);
  });

  const ip = externalIPv4();
  it.skipIf(ip === undefined)(
    "a server on this machine's non-loopback address receives nothing (LEOFLOW_URL and --url)",
    async () => {
      const seen: IncomingHttpHeaders[] = [];
      const server: Server = createServer((req, res) => {
        seen.push(req.headers);
        res.writeHead(200, { 'content-type': 'application/json' });
        // `dags list` reads the DAGs and the import errors' count
        res.end(
          req.url?.startsWith('/api/v1/import-errors') ? '{"import_errors":[]}' : '{"dags":[]}',
        );
      });
      await new Promise<void>((r) => server.listen(0, ip, r));
      const url = `http://${ip}:${(server.address() as AddressInfo).port}`;
      try {
        const viaEnv = await cli(['dags', 'list'], { ...env, LEOFLOW_URL: url });
        const viaFlag = await cli(['dags', 'list', '--url', url], env);
        for (const r of [viaEnv, viaFlag]) {
          expect(r.code).toBe(1);
          expect(r.stderr).toMatch(/not sending the local standalone's admin token/);
        }
        expect(seen).toEqual([]);
        // The same server does receive a request that carries an explicit token.
        const given = await cli(['dags', 'list'], {
          ...env,
          LEOFLOW_URL: url,
          LEOFLOW_TOKEN: 'given',
        });
        expect(given.code, given.stderr).toBe(0);
        expect(seen.length).toBeGreaterThan(0);
        expect(seen.every((h) => h.authorization === 'Bearer given')).toBe(true);
      } finally {
        await new Promise<void>((r) => server.close(() => r()));
      }
    },
  );
});

describe('connections set --password-stdin / --password-file', () => {
  const local = () => ({ ...env, LEOFLOW_URL: sa.url });
  const reveal = async (id: string) => {
    const res = await cli(['connections', 'get', id, '--reveal', '-o', 'json'], local());
    expect(res.code, res.stderr).toBe(0);
    return JSON.parse(res.stdout) as { connection: Record<string, unknown>; uri: string };
  };

  it('--password-stdin with --conn-type: the password comes from stdin, one trailing newline dropped', async () => {
    const pw = 'pä ss:w/rd@1 ';
    const res = await cliWithInput(
      [
        'connections',
        'set',
        'pg_stdin',
        '--conn-type',
        'postgres',
        '--host',
        'db',
        '--login',
        'u',
        '--password-stdin',
      ],
      local(),
      `${pw}\n`,
    );
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout + res.stderr).not.toContain(pw.trim());
    expect((await reveal('pg_stdin')).connection).toMatchObject({
      conn_type: 'postgres',
      host: 'db',
      login: 'u',
      password: pw,
    });
  });

  it('--password-file with a --uri that has no password', async () => {
    const file = join(scratch.dir, 'pw.txt');
    writeFileSync(file, 's3cret-from-file\r\n', { mode: 0o600 });
    const res = await cli(
      [
        'connections',
        'set',
        'pg_file',
        '--uri',
        'postgres://u@db.internal:5432/wh',
        '--password-file',
        file,
      ],
      local(),
    );
    expect(res.code, res.stderr).toBe(0);
    const got = await reveal('pg_file');
    expect(got.connection).toMatchObject({
      login: 'u',
      password: 's3cret-from-file',
      host: 'db.internal',
      port: 5432,
      schema: 'wh',
    });
    expect(got.uri).toBe('postgres://u:s3cret-from-file@db.internal:5432/wh');
  });

  it('--password still works but warns that argv is visible', async () => {
    const res = await cli(
      [
        'connections',
        'set',
        'pg_argv',
        '--conn-type',
        'postgres',
        '--host',
        'db',
        '--password',
        'in-argv',
      ],
      local(),
    );
    expect(res.code, res.stderr).toBe(0);
    expect(res.stderr).toMatch(
      /warning: --password puts the password in the command line.*--password-stdin/,
    );
    expect((await reveal('pg_argv')).connection['password']).toBe('in-argv');
  });

  it('refuses two password sources, a URI or JSON that already has one, and an empty password (exit 2)', async () => {
    const file = join(scratch.dir, 'pw2.txt');
    writeFileSync(file, 'x');
    const empty = join(scratch.dir, 'empty.txt');
    writeFileSync(empty, '\n');
    const cases: [string[], RegExp][] = [
      [
        ['--conn-type', 'http', '--password', 'a', '--password-file', file],
        /only one of --password-stdin, --password-file or --password/,
      ],
      [
        ['--uri', 'postgres://u:inline@db/wh', '--password-file', file],
        /--uri connection already carries a password/,
      ],
      [
        ['--json', '{"conn_type": "http", "password": "inline"}', '--password-file', file],
        /--json connection already carries a password/,
      ],
      [['--conn-type', 'http', '--password-file', empty], /is empty/],
      [
        ['--conn-type', 'http', '--password-file', join(scratch.dir, 'absent')],
        /cannot be read \(ENOENT\)/,
      ],
    ];
    for (const [args, pattern] of cases) {
      const res = await cli(['connections', 'set', 'bad', ...args], local());
      expect(res.code, `${args.join(' ')}: ${res.stderr}`).toBe(2);
      expect(res.stderr).toMatch(pattern);
      expect(res.stderr).not.toContain('inline');
    }
    const emptyStdin = await cliWithInput(
      ['connections', 'set', 'bad', '--conn-type', 'http', '--password-stdin'],
      local(),
      '',
    );
    expect(emptyStdin.code).toBe(2);
    expect(emptyStdin.stderr).toMatch(/standard input is empty/);
    expect((await cli(['connections', 'get', 'bad'], local())).code).toBe(1);
  });
});
