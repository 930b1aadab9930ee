import type { Command } from 'commander';
import { ApiClient, CliError } from '../client.js';
import { parseDurationMs } from '../duration.js';
import { globalOpts } from '../global-options.js';
import { parseOutput, print } from '../output.js';

type TokenView = {
  id: string;
  tenant_id: string;
  name: string;
  role: string;
  created_by: string;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
  token?: string;
};

const TOKEN_COLUMNS = [
  'id',
  'name',
  'role',
  'created_by',
  'created_at',
  'expires_at',
  'revoked_at',
];

export function registerAuth(program: Command): void {
  const auth = program
    .command('auth')
    .description(
      'API tokens, roles and who you are (tokens are JWTs for the leoflow-user audience)',
    );

  auth
    .command('create-token')
    .description(
      'mint an API token and print it ONCE (tokens:create; another tenant needs a platform admin)',
    )
    .requiredOption(
      '--role <role>',
      'admin, operator, developer or viewer (see `leoflow auth roles`)',
    )
    .option('--tenant <tenant>', "the tenant the token acts in (default: your token's tenant)")
    .option('--name <name>', 'a name for lists and the audit log (default token-<id>)')
    .option('--ttl <duration>', 'expire after this long, e.g. 12h or 30d (default: no expiry)')
    .action(
      async (
        flags: { role: string; tenant?: string; name?: string; ttl?: string },
        cmd: Command,
      ) => {
        const g = globalOpts(cmd);
        const format = parseOutput(g.output);
        const client = new ApiClient(g);
        const ttlSeconds =
          flags.ttl === undefined
            ? undefined
            : Math.max(1, Math.round(parseDurationMs(flags.ttl, '--ttl') / 1000));
        let path = '/api/v1/tokens';
        if (flags.tenant !== undefined) {
          const me = await client.request<{ tenant_id: string }>('GET', '/api/v1/whoami');
          if (me.tenant_id !== flags.tenant) {
            path = `/api/v1/tenants/${encodeURIComponent(flags.tenant)}/tokens`;
          }
        }
        const created = await client.request<TokenView>('POST', path, {
          role: flags.role,
          ...(flags.name !== undefined ? { name: flags.name } : {}),
          ...(ttlSeconds !== undefined ? { ttl_seconds: ttlSeconds } : {}),
        });
        if (format === 'table') {
          process.stdout.write(`${created.token ?? ''}\n`);
          process.stderr.write(
            `token ${created.id} (${created.name}, role ${created.role}, tenant ${created.tenant_id}` +
              `${created.expires_at ? `, expires ${created.expires_at}` : ', no expiry'}); ` +
              'it is shown only this once — store it now (e.g. `leoflow config set-profile <name> --token-file -`)\n',
          );
        } else print(format, created);
      },
    );

  auth
    .command('revoke-token <id-or-name>')
    .description('revoke a token of your tenant: refused from the next request on (tokens:revoke)')
    .action(async (ref: string, _f: unknown, cmd: Command) => {
      const g = globalOpts(cmd);
      const client = new ApiClient(g);
      const id = await resolveTokenId(client, ref);
      const res = await client.request<TokenView>(
        'DELETE',
        `/api/v1/tokens/${encodeURIComponent(id)}`,
      );
      print(parseOutput(g.output), res, { rows: [res], columns: TOKEN_COLUMNS });
    });

  auth
    .command('list-tokens')
    .description("your tenant's tokens (never the tokens themselves; tokens:read)")
    .option('--include-revoked', 'also list revoked tokens')
    .action(async (flags: { includeRevoked?: boolean }, cmd: Command) => {
      const g = globalOpts(cmd);
      const tokens = await new ApiClient(g).listAll<TokenView>(
        `/api/v1/tokens${flags.includeRevoked ? '?include_revoked=true' : ''}`,
        'tokens',
      );
      const res = { tokens };
      print(parseOutput(g.output), res, { rows: res.tokens, columns: TOKEN_COLUMNS });
    });

  auth
    .command('whoami')
    .description("the calling token's tenant, role and permissions")
    .action(async (_f: unknown, cmd: Command) => {
      const g = globalOpts(cmd);
      const me = await new ApiClient(g).request<{
        subject: string;
        tenant_id: string;
        role: string;
        token_id: string;
        permissions: string[];
      }>('GET', '/api/v1/whoami');
      const format = parseOutput(g.output);
      if (format === 'table') {
        process.stdout.write(
          `${me.subject} (token ${me.token_id}) in tenant ${me.tenant_id}, role ${me.role}\n` +
            `permissions: ${me.permissions.join(' ')}\n`,
        );
      } else print(format, me);
    });

  auth
    .command('roles')
    .description('the built-in roles and the permissions each grants')
    .action(async (_f: unknown, cmd: Command) => {
      const g = globalOpts(cmd);
      const res = await new ApiClient(g).request<{
        roles: { name: string; description: string; permissions: string[] }[];
      }>('GET', '/api/v1/roles');
      print(parseOutput(g.output), res, {
        rows: res.roles.map((r) => ({ ...r, permissions: r.permissions.join(' ') })),
        columns: ['name', 'description', 'permissions'],
      });
    });

  auth
    .command('rotate-signing-key')
    .description(
      'new signing key for API tokens; existing tokens keep working until revoked (platform admin; audited)',
    )
    .action(async (_f: unknown, cmd: Command) => {
      const g = globalOpts(cmd);
      const res = await new ApiClient(g).request<{
        kid: string;
        keys: { kid: string; signing: boolean }[];
      }>('POST', '/api/v1/auth/signing-keys/rotate', {});
      print(parseOutput(g.output), res, { rows: res.keys, columns: ['kid', 'signing'] });
    });
}

/** A token is named by id, or by a name that matches exactly one active token. */
async function resolveTokenId(client: ApiClient, ref: string): Promise<string> {
  if (/^[\w-]+\.[\w-]+\.[\w-]+$/.test(ref) && ref.length > 100) {
    // Never send a bearer token anywhere as an identifier (URLs end up in proxy logs).
    throw new CliError(
      'that looks like a token itself; revoke by the id or name that `leoflow auth list-tokens` shows',
      2,
      'LF_USAGE',
    );
  }
  const res = await client.request<{ tokens: TokenView[] }>(
    'GET',
    `/api/v1/tokens?limit=10&name=${encodeURIComponent(ref)}`,
  );
  if (res.tokens.length === 1) return res.tokens[0]!.id;
  if (res.tokens.length > 1) {
    throw new CliError(
      `${res.tokens.length} active tokens are named "${ref}"; revoke by id (see \`leoflow auth list-tokens\`)`,
      2,
      'LF_TOKEN_AMBIGUOUS',
    );
  }
  return ref;
}
