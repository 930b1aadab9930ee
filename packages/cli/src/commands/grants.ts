import type { Command } from 'commander';
import { ApiClient, CliError } from '../client.js';
import { globalOpts } from '../global-options.js';
import { parseOutput, print } from '../output.js';

/**
 * `leoflow variables grants|set-grants` and `leoflow connections grants|set-grants` (issue 34):
 * which DAGs may declare a secret. Patterns are DAG ids with `*` and `?`, anchored and
 * case-sensitive; `--every-dag` is the default (no list), `--no-dag` grants it to none.
 */
interface GrantsReply {
  name: string;
  grants: string[] | null;
  declared_by: { dag_id: string; granted: boolean }[];
}

interface GrantChangeReply extends GrantsReply {
  previous: string[] | null;
  applied: boolean;
  losing: string[];
  gaining: string[];
}

const show = (g: string[] | null) =>
  g === null ? 'every DAG' : g.length === 0 ? 'no DAG' : g.join(', ');

export function registerGrantCommands(
  parent: Command,
  kind: 'variables' | 'connections',
  arg: string,
): void {
  const base = `/api/v1/${kind}`;
  parent
    .command(`grants <${arg}>`)
    .description(
      'which DAGs may declare it (patterns on the DAG id), and which registered DAGs declare it',
    )
    .action(async (name: string, _f: unknown, cmd: Command) => {
      const g = globalOpts(cmd);
      const res = await new ApiClient(g).request<GrantsReply>(
        'GET',
        `${base}/${encodeURIComponent(name)}/grants`,
      );
      const format = parseOutput(g.output);
      if (format !== 'table') return print(format, res);
      process.stdout.write(`${name} may be declared by: ${show(res.grants)}\n`);
      for (const d of res.declared_by)
        process.stdout.write(`  ${d.dag_id}: ${d.granted ? 'granted' : 'NOT granted'}\n`);
    });

  parent
    .command(`set-grants <${arg}> [patterns...]`)
    .description(
      'replace the DAG id patterns (* and ?; anchored, case-sensitive) that may declare it; lists the registered DAGs that lose it (admin)',
    )
    .option('--every-dag', 'any DAG of the tenant may declare it (the default for a new secret)')
    .option('--no-dag', 'no DAG may declare it')
    .option('--dry-run', 'only say which registered DAGs would lose or gain it; write nothing')
    .action(
      async (
        name: string,
        patterns: string[],
        flags: { everyDag?: boolean; dag?: boolean; dryRun?: boolean },
        cmd: Command,
      ) => {
        const none = flags.dag === false;
        const chosen = [patterns.length > 0, flags.everyDag === true, none].filter(Boolean);
        if (chosen.length !== 1) {
          throw new CliError(
            'give DAG id patterns, or --every-dag, or --no-dag (exactly one of them)',
            2,
          );
        }
        const grants = flags.everyDag ? null : none ? [] : patterns;
        const g = globalOpts(cmd);
        const res = await new ApiClient(g).request<GrantChangeReply>(
          'PUT',
          `${base}/${encodeURIComponent(name)}/grants`,
          { grants, dry_run: flags.dryRun ?? false },
        );
        const format = parseOutput(g.output);
        if (format !== 'table') return print(format, res);
        const verb = res.applied ? 'now' : 'would be (dry run: nothing written)';
        process.stdout.write(
          `${name} ${verb} granted to: ${show(res.grants)} (was: ${show(res.previous)})\n`,
        );
        if (res.losing.length > 0)
          process.stdout.write(
            `registered DAGs that ${res.applied ? 'lost' : 'would lose'} it (their tasks fail with LF_SECRET_NOT_GRANTED): ${res.losing.join(', ')}\n`,
          );
        if (res.gaining.length > 0)
          process.stdout.write(
            `registered DAGs that ${res.applied ? 'gained' : 'would gain'} it: ${res.gaining.join(', ')}\n`,
          );
      },
    );
}
