#!/usr/bin/env node
import { CommanderError } from 'commander';
import { isLeoflowError } from '@leoflow/core';
import { CliError } from './client.js';
import { buildProgram } from './program.js';

// `leoflow … | head -1`: the reader went away. Stop quietly (no stack trace), still non-zero like a
// process killed by SIGPIPE, so a supervised `leoflow standalone` is not taken for a clean stop.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(1);
  process.stderr.write(`error: cannot write the output: ${err.message}\n`);
  process.exit(1);
});

/** Exit codes: 0 ok, 1 refused or failed, 2 usage (commander's own errors included). */
async function main(): Promise<void> {
  try {
    await buildProgram().parseAsync(process.argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      process.exitCode = err.exitCode === 0 ? 0 : 2;
      return;
    }
    if (err instanceof CliError) {
      if (err.message) process.stderr.write(`error: ${err.message}\n`);
      process.exitCode = err.exitCode;
      return;
    }
    if (isLeoflowError(err)) {
      process.stderr.write(`error [${err.code}]: ${err.message}\n`);
      process.exitCode = 1;
      return;
    }
    process.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  }
}

void main();
