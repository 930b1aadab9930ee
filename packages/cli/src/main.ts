#!/usr/bin/env node
import { CommanderError } from 'commander';
import { isLeoflowError } from '@leoflow/core';
import { CliError } from './client.js';
import { buildProgram } from './program.js';

/** Exit codes: 0 ok, 1 refused or failed, 2 usage. */
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
    process.stderr.write(`error: ${(err as Error).message}\n`);
    process.exitCode = 1;
  }
}

void main();
