import type { Command } from 'commander';

export interface GlobalOptions {
  url?: string;
  token?: string;
  output?: string;
  dataDir?: string;
}

/** Options declared on the root program, seen from any sub-command. */
export function globalOpts(cmd: Command): GlobalOptions {
  return cmd.optsWithGlobals<GlobalOptions>();
}
