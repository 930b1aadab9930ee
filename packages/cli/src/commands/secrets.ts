import type { Command } from 'commander';
import { ApiClient } from '../client.js';
import { globalOpts } from '../global-options.js';
import { parseOutput, print } from '../output.js';

export function registerSecrets(program: Command): void {
  const secrets = program.command('secrets').description('the vault encryption keyring');

  secrets
    .command('rotate-key')
    .description(
      'make a new vault key current and re-encrypt every stored secret with it, online (admin; audited)',
    )
    .option(
      '--resume',
      'no new key: finish re-encrypting values still under older keys (after an interruption)',
    )
    .option('--prune', 'afterwards, drop older keys that no longer seal anything')
    .action(async (flags: { resume?: boolean; prune?: boolean }, cmd: Command) => {
      const g = globalOpts(cmd);
      const format = parseOutput(g.output);
      if (format === 'table') process.stderr.write('re-encrypting the vault…\n');
      const res = await new ApiClient(g).request<{
        current_key_id: string;
        resealed: number;
        remaining_under_old_keys: number;
        pruned: string[];
      }>('POST', '/api/v1/secrets/rotate-key', {
        resume: flags.resume ?? false,
        prune: flags.prune ?? false,
      });
      if (format === 'table') {
        process.stdout.write(
          `current key ${res.current_key_id}; re-encrypted ${res.resealed} value(s); ` +
            `${res.remaining_under_old_keys} still under older keys` +
            (res.remaining_under_old_keys > 0 ? ' (run again with --resume)' : '') +
            (res.pruned.length > 0 ? `; removed keys ${res.pruned.join(', ')}` : '') +
            '\n',
        );
      } else print(format, res);
      if (res.remaining_under_old_keys > 0) process.exitCode = 1;
    });
}
