import { isLoopbackHost } from '../attempts/secret-delivery.js';
import type { SectionContext } from './findings.js';
import { databaseUrlHasPassword } from './redact.js';

/**
 * Doctor section: the listeners and the command line — a REST API or metrics port off loopback,
 * and where a PostgreSQL password sits (flag or environment). Exposures only.
 */
export function listeners(ctx: SectionContext): void {
  const { cfg, opts, expose } = ctx;
  if (!isLoopbackHost(cfg.http.host)) {
    expose(
      'http.cleartext_non_loopback',
      `The REST API listens on ${cfg.http.host}:${cfg.http.port} over cleartext HTTP: API tokens (the admin token among them) and revealed secrets cross the network unencrypted.`,
      'Bind it to 127.0.0.1 (--host) and put a TLS-terminating proxy in front of it.',
    );
  }
  if (cfg.metrics.port !== null && !isLoopbackHost(cfg.metrics.host)) {
    expose(
      'metrics.non_loopback',
      `The metrics listener on ${cfg.metrics.host}:${cfg.metrics.port} answers anyone who can reach it, without authentication (counts only: no tenant, DAG, task or secret names).`,
      'Bind it to 127.0.0.1, or firewall the port to your Prometheus.',
    );
  }
  if (cfg.database.kind === 'postgres' && databaseUrlHasPassword(cfg.database.url)) {
    if (opts.databaseUrlSource === 'flag') {
      expose(
        'database_url.password_on_command_line',
        "The database password is on the control plane's command line (--database-url): every local user can read it in the process list.",
        'Pass the URL in LEOFLOW_DATABASE_URL instead, or leave the password out of it and use ~/.pgpass (mode 0600) or certificate authentication.',
      );
    } else {
      expose(
        'database_url.password_in_environment',
        "The database password is in the control plane's environment (LEOFLOW_DATABASE_URL): processes of the same user, and root, can read it from /proc/<pid>/environ.",
        'Leave the password out of the URL and use ~/.pgpass (mode 0600) or certificate authentication.',
      );
    }
  }
}
