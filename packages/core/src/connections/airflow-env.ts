import { VAR_ENV_PREFIX } from '../variables/env-name.js';
import type { ImportedVariable } from '../variables/export-file.js';
import { CONN_ENV_PREFIX } from './env-name.js';
import { pyStrip } from './py-str.js';
import { connectionFromString, type ImportedConnection } from './import.js';
import {
  CONN_ID_RULE,
  importError,
  isValidConnId,
  problemOf,
  type ImportIssue,
} from './import-issues.js';

/**
 * Reads Airflow's environment secrets: `AIRFLOW_CONN_<ID>` (a URI, or JSON when the value
 * starts with `{`, as Airflow 2.3+ accepts) and `AIRFLOW_VAR_<KEY>` (the raw string). Ids and
 * keys come back lower-cased, the form Airflow's own lookups produce. Names with nothing after
 * the prefix, unset (`undefined`) values and empty connection values are skipped — Airflow's
 * environment backend reads `AIRFLOW_CONN_X=` as "not found" (`if value:`); output is sorted by
 * name so the result does not depend on environment order.
 *
 * Problems are collected and thrown at once as `LF_ENV_IMPORT_INVALID`, naming the variable,
 * never its value.
 */
export function fromAirflowEnv(env: Record<string, string | undefined>): {
  connections: ImportedConnection[];
  variables: ImportedVariable[];
} {
  const issues: ImportIssue[] = [];
  const connections: ImportedConnection[] = [];
  const variables: ImportedVariable[] = [];
  const connFrom = new Map<string, string>();
  const varFrom = new Map<string, string>();

  for (const name of Object.keys(env).sort()) {
    const value = env[name];
    if (value === undefined) continue;
    if (name.startsWith(CONN_ENV_PREFIX)) {
      const id = name.slice(CONN_ENV_PREFIX.length).toLowerCase();
      if (id === '' || value === '') continue;
      const issue = (problem: string) => issues.push({ id, line: null, envVar: name, problem });
      if (!isValidConnId(id)) {
        issue(CONN_ID_RULE);
        continue;
      }
      const other = connFrom.get(id);
      if (other !== undefined) {
        issue(`it names the same connection as ${other} (ids are lower-cased)`);
        continue;
      }
      connFrom.set(id, name);
      if (value.trim() === '') {
        issue('the value is only whitespace');
        continue;
      }
      try {
        // Airflow's environment backend strips the value with Python's str.strip() first.
        connections.push({ id, conn: connectionFromString(pyStrip(value)) });
      } catch (e) {
        issue(problemOf(e));
      }
    } else if (name.startsWith(VAR_ENV_PREFIX)) {
      const key = name.slice(VAR_ENV_PREFIX.length).toLowerCase();
      if (key === '') continue;
      const other = varFrom.get(key);
      if (other !== undefined) {
        issues.push({
          id: key,
          line: null,
          envVar: name,
          problem: `it names the same variable as ${other} (keys are lower-cased)`,
        });
        continue;
      }
      varFrom.set(key, name);
      variables.push({ key, value });
    }
  }
  if (issues.length > 0) throw importError('LF_ENV_IMPORT_INVALID', 'the environment', issues);
  return { connections, variables };
}
