import type { Command } from 'commander';
import { ApiClient, CliError } from '../client.js';
import { parseDurationMs } from '../duration.js';
import { globalOpts } from '../global-options.js';
import { parseOutput, print } from '../output.js';

interface AuditEvent {
  at: string;
  actor: string;
  action: string;
  resource_type: string;
  resource_id: string;
  request_id: string | null;
  payload: Record<string, unknown>;
}

export function registerAudit(program: Command): void {
  const audit = program.command('audit').description("your tenant's audit log (audit:read)");

  audit
    .command('list')
    .description('mutations and credential-plane events, newest first')
    .option(
      '--since <when>',
      'an ISO time (2026-11-30T12:00:00Z) or a duration back from now (1h, 7d)',
    )
    .option('--action <action>', 'only this action, e.g. token.create or secret.liveness_denied')
    .option('--limit <n>', 'at most this many events (default 100, max 1000)', '100')
    .action(async (flags: { since?: string; action?: string; limit: string }, cmd: Command) => {
      const g = globalOpts(cmd);
      const limit = Number(flags.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
        throw new CliError(`--limit must be 1-1000 (got "${flags.limit}")`, 2, 'LF_USAGE');
      }
      const q = new URLSearchParams({ limit: String(limit) });
      if (flags.since !== undefined) q.set('since', sinceToIso(flags.since));
      if (flags.action !== undefined) q.set('action', flags.action);
      const res = await new ApiClient(g).request<{ events: AuditEvent[] }>(
        'GET',
        `/api/v1/audit?${q.toString()}`,
      );
      print(parseOutput(g.output), res, {
        rows: res.events.map((e) => ({
          ...e,
          resource: `${e.resource_type}:${e.resource_id}`,
          details: Object.entries(e.payload)
            .filter(([k]) => k !== 'token_id')
            .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
            .join(' '),
        })),
        columns: ['at', 'actor', 'action', 'resource', 'details'],
      });
    });
}

function sinceToIso(value: string): string {
  if (/^\d+(\.\d+)?(ms|s|m|h|d)$/.test(value.trim())) {
    return new Date(Date.now() - parseDurationMs(value, '--since')).toISOString();
  }
  const t = Date.parse(value);
  if (Number.isNaN(t)) {
    throw new CliError(
      `--since must be an ISO time (2026-11-30T12:00:00Z) or a duration like 1h or 7d (got "${value}")`,
      2,
      'LF_USAGE',
    );
  }
  return new Date(t).toISOString();
}
