import type { Command } from 'commander';
import type { DoctorReport } from '@leoflow/server';
import { ApiClient } from '../client.js';
import { globalOpts } from '../global-options.js';
import { parseOutput, print } from '../output.js';
import { addStandaloneOptions, commandConfig, type StandaloneFlags } from './standalone.js';

/**
 * `leoflow doctor`: the configuration `leoflow standalone` would run with (same flags, same
 * LEOFLOW_* environment, same --config file), the credential plane's posture with every residual
 * exposure, and health checks. Read-only. Exit 0 when no check fails, 1 when one does, 2 on a
 * usage or configuration error (as standalone would refuse it).
 */
export function registerDoctor(program: Command): void {
  addStandaloneOptions(program.command('doctor'))
    .description(
      "check a Lite control plane's configuration, credential posture and data dir (read-only; takes standalone's flags)",
    )
    .option(
      '--server',
      'ask the running control plane (LEOFLOW_URL / --url / profile) for its own report: the ports it bound, the store it holds open (platform admin; doctor:read)',
    )
    .action(async (flags: StandaloneFlags, cmd: Command) => {
      const g = globalOpts(cmd);
      const format = parseOutput(g.output);
      if (flags.server) {
        const report = await new ApiClient(g).request<DoctorReport>('GET', '/api/v1/doctor');
        const { renderDoctorReport } = await import('@leoflow/server');
        if (format === 'table') process.stdout.write(renderDoctorReport(report));
        else print(format, report);
        if (report.summary.fail > 0) process.exitCode = 1;
        return;
      }
      const { cfg, settings } = await commandConfig('standalone', flags);
      const { buildDoctorReport, nodeDoctorDeps, renderDoctorReport } =
        await import('@leoflow/server');
      const urlSource = settings.sources['database.url'];
      const databaseUrlSource =
        urlSource === 'flags'
          ? ('flag' as const)
          : urlSource === 'env'
            ? ('env' as const)
            : undefined;
      const report = await buildDoctorReport(cfg, nodeDoctorDeps(), {
        ...(databaseUrlSource !== undefined ? { databaseUrlSource } : {}),
      });
      if (format === 'table') process.stdout.write(renderDoctorReport(report));
      else print(format, report);
      if (report.summary.fail > 0) process.exitCode = 1;
    });
}
