import { Command, Option } from 'commander';
import { registerAudit } from './commands/audit.js';
import { registerAuth } from './commands/auth.js';
import { registerCompletion } from './commands/completion.js';
import { registerConfig } from './commands/config.js';
import { registerConnections } from './commands/connections.js';
import { registerDags } from './commands/dags.js';
import { registerDoctor } from './commands/doctor.js';
import { registerLogin } from './commands/login.js';
import { registerRuns } from './commands/runs.js';
import { registerSecrets } from './commands/secrets.js';
import { registerServer } from './commands/server.js';
import { registerStandalone } from './commands/standalone.js';
import { registerTasks } from './commands/tasks.js';
import { registerTenants } from './commands/tenants.js';
import { registerRunners } from './commands/runners.js';
import { registerCells } from './commands/cells.js';
import { registerDoor } from './commands/door.js';
import { registerRunner } from './commands/runner.js';
import { registerVariables } from './commands/variables.js';

export function buildProgram(): Command {
  const program = new Command('leoflow')
    .description(
      'Leoflow: a workflow orchestrator whose tasks get exactly the credentials they declare',
    )
    .version('0.1.0')
    .option('--url <url>', 'control-plane URL (env LEOFLOW_URL, default http://127.0.0.1:8080)')
    .option('--token <token>', 'API token (env LEOFLOW_TOKEN; default: ./.leoflow/admin.token)')
    .addOption(
      new Option('-o, --output <format>', 'output format')
        .choices(['table', 'json', 'yaml'])
        .default('table'),
    )
    .addOption(
      new Option('--profile <name>', 'use this profile from `leoflow config` for one command').env(
        'LEOFLOW_PROFILE',
      ),
    )
    .showHelpAfterError()
    .exitOverride();
  registerStandalone(program);
  registerServer(program);
  registerDags(program);
  registerRuns(program);
  registerTasks(program);
  registerVariables(program);
  registerConnections(program);
  registerSecrets(program);
  registerAuth(program);
  registerTenants(program);
  registerRunners(program);
  registerCells(program);
  registerDoor(program);
  registerRunner(program);
  registerAudit(program);
  registerDoctor(program);
  registerLogin(program);
  registerConfig(program);
  registerCompletion(program);
  return program;
}
