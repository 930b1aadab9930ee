import { DAG_ERROR_CODES as C, childPath, didYouMean, indexPath } from './diagnostics.js';
import type { SemanticIssue } from './semantic.js';
import { DEFAULT_MAX_MAP_LENGTH, ID_PATTERN, type DagSpec } from './spec.js';

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const EXIT_CODE = /^(0|[1-9][0-9]{0,2})$/;

/**
 * The DAG-shape checks (setup/teardown, branch/short_circuit, expand, task groups) on a compiled
 * spec, shared by the compiler and validateDagSpec like every semantic check.
 */
export function checkShapes(
  spec: DagSpec,
  firstIndex: ReadonlyMap<string, number>,
  add: (issue: SemanticIssue) => void,
): void {
  const err = (code: string, path: string, message: string, hint: string, atKey = false): void =>
    add({ code, severity: 'error', path, message, hint, atKey });
  const groups = new Map<string, number>();
  const listed = new Set((spec.task_groups ?? []).map((g) => g.group_id));
  (spec.task_groups ?? []).forEach((g, k) => {
    const base = indexPath('task_groups', k);
    if (!ID_PATTERN.test(g.group_id)) {
      err(
        C.BAD_ID,
        childPath(base, 'group_id'),
        `group_id "${g.group_id}" is not a valid id`,
        'use letters, digits, _ . - (at most 200 characters)',
      );
    }
    if (groups.has(g.group_id) || firstIndex.has(g.group_id)) {
      err(
        C.TASK_GROUP,
        childPath(base, 'group_id'),
        `group_id "${g.group_id}" is already used by ${groups.has(g.group_id) ? 'another group' : 'a task'}`,
        'give each task group an id no other group or task uses',
      );
    } else groups.set(g.group_id, k);
    if (g.parent !== undefined && !groups.has(g.parent)) {
      err(
        C.TASK_GROUP,
        childPath(base, 'parent'),
        `the parent "${g.parent}" of group "${g.group_id}" is not a group listed before it`,
        'list every group after its parent in task_groups',
      );
    }
  });
  const target = (id: string): boolean => firstIndex.has(id) || groups.has(id);
  const names = [...firstIndex.keys(), ...groups.keys()];

  spec.tasks.forEach((task, i) => {
    const base = indexPath('tasks', i);
    const at = (k: string): string => childPath(base, k);
    const label = `task "${task.task_id}"`;

    if (task.group !== undefined && !listed.has(task.group)) {
      err(
        C.TASK_GROUP,
        at('group'),
        `${label} names group "${task.group}", which is not in task_groups`,
        'add the group to task_groups, or remove group',
      );
    }

    // ---- setup / teardown
    if (task.setup === true && task.teardown === true) {
      err(
        C.SETUP_TEARDOWN,
        at('teardown'),
        `${label} is marked both setup and teardown`,
        'a task is a setup or a teardown, not both; split it into two tasks',
      );
    }
    if (task.on_failure_fail_dagrun === true && task.teardown !== true) {
      err(
        C.SETUP_TEARDOWN,
        at('on_failure_fail_dagrun'),
        `${label} sets on_failure_fail_dagrun but is not a teardown`,
        'add teardown: true, or remove on_failure_fail_dagrun (a failure of any other task already fails the run)',
      );
    }
    if (task.teardown === true && task.trigger_rule !== 'all_done_setup_success') {
      err(
        C.SETUP_TEARDOWN,
        at('trigger_rule'),
        `${label} is a teardown with trigger_rule ${task.trigger_rule}; a teardown always runs by all_done_setup_success (when a setup of it ran, whatever happened between)`,
        'remove trigger_rule from the teardown',
      );
    }

    // ---- branch / short_circuit
    if (task.branch !== undefined && task.short_circuit !== undefined) {
      err(
        C.BRANCH,
        at('short_circuit'),
        `${label} is both a branch and a short_circuit`,
        'keep one: a branch picks which downstream tasks run, a short_circuit runs all or none',
      );
    }
    if (
      (task.branch?.mode === 'return_value' || task.short_circuit !== undefined) &&
      !task.do_xcom_push
    ) {
      err(
        C.BRANCH,
        at('do_xcom_push'),
        `${label} decides by its return value but sets do_xcom_push: false`,
        'remove do_xcom_push: false (the decision is its last stdout line)',
      );
    }
    if (task.branch?.mode === 'exit_code') {
      const codesPath = childPath(at('branch'), 'exit_codes');
      for (const [code, ids] of Object.entries(task.branch.exit_codes)) {
        const cp = childPath(codesPath, code);
        if (!EXIT_CODE.test(code) || Number(code) > 255) {
          err(
            C.BRANCH,
            cp,
            `exit code "${code}" of ${label}'s branch is not a whole number from 0 to 255`,
            'write exit codes as 0 … 255',
            true,
          );
          continue;
        }
        ids.forEach((id, j) => {
          if (target(id)) return;
          const guess = didYouMean(id, names);
          err(
            C.BRANCH,
            ids.length === 1 ? cp : indexPath(cp, j),
            `${label} branches to "${id}" on exit code ${code}, which is not a task or task group of this DAG`,
            guess
              ? `did you mean "${guess}"? (name tasks by their full id)`
              : 'name a downstream task or task group by its full id',
          );
        });
      }
    }

    // ---- expand
    if (task.max_map_length !== undefined && task.expand === undefined) {
      err(
        C.EXPAND,
        at('max_map_length'),
        `${label} sets max_map_length but is not mapped`,
        'add expand:, or remove max_map_length',
      );
    }
    if (task.expand !== undefined) {
      const roles = [
        task.setup === true ? 'a setup' : '',
        task.teardown === true ? 'a teardown' : '',
        task.branch !== undefined ? 'a branch' : '',
        task.short_circuit !== undefined ? 'a short_circuit' : '',
      ].filter((r) => r !== '');
      if (roles.length > 0) {
        err(
          C.EXPAND,
          at('expand'),
          `${label} is ${roles.join(' and ')}, which cannot be mapped`,
          'map a plain task instead (put the mapped work downstream of it)',
        );
      }
      if (task.expand.length === 0)
        err(C.EXPAND, at('expand'), `${label} has an empty expand`, 'map over at least one list');
      const seen = new Set<string>();
      let literal = 1;
      task.expand.forEach((a, k) => {
        const ap = indexPath(at('expand'), k);
        if (!ENV_NAME.test(a.env)) {
          err(
            C.EXPAND,
            ap,
            `expand argument "${a.env}" is not an environment variable name`,
            'use letters, digits and _ (not starting with a digit)',
            true,
          );
        } else if (a.env.toLowerCase().startsWith('leoflow_')) {
          err(
            C.RESERVED_ENV,
            ap,
            `expand argument "${a.env}" is reserved: LEOFLOW_* variables belong to the agent`,
            `rename it, e.g. "${a.env.replace(/^leoflow_/i, 'APP_')}"`,
            true,
          );
        } else if (Object.prototype.hasOwnProperty.call(task.env, a.env)) {
          err(
            C.EXPAND,
            ap,
            `${a.env} is both in env and in expand`,
            `an argument is either constant (env) or mapped (expand); remove ${a.env} from one of them`,
            true,
          );
        }
        if (seen.has(a.env.toUpperCase())) {
          err(
            C.EXPAND,
            ap,
            `expand argument "${a.env}" is given twice`,
            'remove the second one',
            true,
          );
        }
        seen.add(a.env.toUpperCase());
        if ('values' in a) {
          literal *= a.values.length;
          return;
        }
        const up = firstIndex.get(a.xcom);
        if (up === undefined) {
          const guess = didYouMean(a.xcom, names);
          err(
            C.EXPAND,
            childPath(ap, 'xcom'),
            `${label} maps over the return value of "${a.xcom}", which is not a task of this DAG`,
            guess ? `did you mean "${guess}"?` : 'name an upstream task',
          );
          return;
        }
        if (!task.depends_on.includes(a.xcom)) {
          err(
            C.EXPAND,
            childPath(ap, 'xcom'),
            `${label} maps over the return value of "${a.xcom}" but does not depend on it`,
            `add "${a.xcom}" to depends_on`,
          );
        }
        if (!spec.tasks[up]!.do_xcom_push) {
          err(
            C.EXPAND,
            childPath(ap, 'xcom'),
            `${label} maps over the return value of "${a.xcom}", which pushes none`,
            `add do_xcom_push: true to "${a.xcom}" (its last stdout line, a JSON list, is the list)`,
          );
        }
      });
      const max = task.max_map_length ?? DEFAULT_MAX_MAP_LENGTH;
      const allLiteral = task.expand.every((a) => 'values' in a);
      if (allLiteral && task.expand.length > 0 && literal > max) {
        err(
          C.EXPAND_TOO_LONG,
          at('expand'),
          `${label} expands to ${literal} map indexes; its max_map_length is ${max}`,
          `shorten the lists, or set max_map_length: ${Math.min(literal, 10_000)} on the task (at most 10000)`,
        );
      }
    }
  });
}
