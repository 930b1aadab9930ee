import { DAG_ERROR_CODES as C, childPath, didYouMean } from './diagnostics.js';
import type { DagSpec, TaskGroupSpec } from './spec.js';

/**
 * Task groups and the dependency names of leoflow.yaml, resolved into the flat graph the
 * compiled spec holds (Airflow's TaskGroup semantics):
 *
 * - a task's id is prefixed with its group's id (`group.task`), unless the group sets
 *   `prefix_group_id: false`; a nested group's id is prefixed the same way by its parent;
 * - a name in `depends_on` (or `setups`, or an `expand` xcom) is looked up from the innermost
 *   group outwards: `load` inside group `etl` means `etl.load` if there is one, else `load`; a
 *   full id always works;
 * - depending on a group means depending on each of its leaves (its tasks with no downstream
 *   inside it); a group's own `depends_on` becomes a dependency of each of its roots (its tasks
 *   with no upstream inside it).
 *
 * The compiler records where each task and name was written; resolve() rewrites the spec's
 * depends_on into full task ids and keeps, for each resolved entry, the path of the name it came
 * from, so diagnostics about the compiled graph point at the author's text.
 */

export interface GroupCtx {
  /** full group id */
  id: string;
  prefix: boolean;
  parent: GroupCtx | null;
  /** where the group item was written, e.g. tasks[2] */
  path: string;
  tooltip?: string;
  deps: RawRef[];
}

export interface RawRef {
  name: string;
  /** path of the name in the file */
  path: string;
  kind: 'dep' | 'setup' | 'xcom';
  /** for 'xcom': which expand argument of the task it feeds */
  arg?: number;
}

type Ref = { task: string } | { group: GroupCtx } | undefined;

export type Report = (code: string, path: string, message: string, hint: string) => void;

export class GraphSources {
  readonly groups: GroupCtx[] = [];
  /** flat task index → where the task was written */
  readonly taskSrc: string[] = [];
  readonly taskCtx: (GroupCtx | null)[] = [];
  readonly taskRefs: RawRef[][] = [];
  /** flat task index → depends_on index → the path it came from (filled by resolve) */
  readonly depPaths: string[][] = [];

  /** The id a child labelled `label` gets inside `ctx` (Airflow's TaskGroup.child_id). */
  static childId(ctx: GroupCtx | null, label: string): string {
    return ctx !== null && ctx.prefix ? `${ctx.id}.${label}` : label;
  }

  /** Whether the file uses groups or names that resolve to something else than themselves. */
  get trivial(): boolean {
    return (
      this.groups.length === 0 && this.taskRefs.every((refs) => refs.every((r) => r.kind === 'dep'))
    );
  }

  /** The compiled-spec path `tasks[i]…` translated to where it was written. */
  sourcePath(path: string): string {
    const m = /^tasks\[(\d+)\](.*)$/s.exec(path);
    if (m) {
      const i = Number(m[1]);
      const rest = m[2] ?? '';
      const dep = /^\.depends_on\[(\d+)\](.*)$/s.exec(rest);
      if (dep) {
        const p = this.depPaths[i]?.[Number(dep[1])];
        if (p !== undefined) return p + (dep[2] ?? '');
      }
      const src = this.taskSrc[i];
      if (src !== undefined) return src + rest;
      return path;
    }
    const g = /^task_groups\[(\d+)\](.*)$/s.exec(path);
    if (g) {
      const grp = this.groups[Number(g[1])];
      if (grp !== undefined) return grp.path + (g[2] ?? '');
    }
    return path;
  }

  /**
   * Rewrites `spec.tasks[*].depends_on` into full task ids (and each `expand` xcom into the full
   * id of its upstream, added to depends_on), and sets `spec.task_groups`. Explicit names are
   * kept one for one (an unknown name stays as written, for the unknown-upstream check to report;
   * a duplicate stays, for the duplicate check); a group stands for its leaves; implied entries
   * (setups, expand upstreams, a group's own depends_on) are added once.
   */
  resolve(spec: DagSpec, report: Report): void {
    const tasks = new Map<string, number>();
    spec.tasks.forEach((t, i) => {
      if (!tasks.has(t.task_id)) tasks.set(t.task_id, i);
    });
    // A group id used twice, or also by a task, is reported by the semantic check (on
    // task_groups); the first group of that id is the one names resolve to.
    const groupsById = new Map<string, GroupCtx>();
    for (const g of this.groups) if (!groupsById.has(g.id)) groupsById.set(g.id, g);

    const lookup = (name: string, ctx: GroupCtx | null): Ref => {
      for (let c: GroupCtx | null = ctx; ; c = c.parent) {
        const id = GraphSources.childId(c, name);
        if (tasks.has(id)) return { task: id };
        const g = groupsById.get(id);
        if (g !== undefined) return { group: g };
        if (c === null) return undefined;
      }
    };
    const contains = (outer: GroupCtx, inner: GroupCtx | null): boolean => {
      for (let c = inner; c !== null; c = c.parent) if (c === outer) return true;
      return false;
    };

    // Each task's explicit refs and each group's refs, resolved once.
    const taskRefs = this.taskRefs.map((refs, i) =>
      refs.map((r) => ({ raw: r, ref: lookup(r.name, this.taskCtx[i] ?? null) })),
    );
    const groupRefs = new Map<GroupCtx, { raw: RawRef; ref: Ref }[]>();
    for (const g of groupsById.values()) {
      groupRefs.set(
        g,
        g.deps.map((r) => ({ raw: r, ref: lookup(r.name, g.parent) })),
      );
    }
    const members = new Map<GroupCtx, number[]>();
    for (const g of groupsById.values()) members.set(g, []);
    this.taskCtx.forEach((ctx, i) => {
      for (let c = ctx; c !== null; c = c.parent) members.get(c)?.push(i);
    });
    for (const [g, ms] of members) {
      if (ms.length === 0) {
        report(
          C.TASK_GROUP,
          childPath(g.path, 'tasks'),
          `task group "${g.id}" has no tasks`,
          'add tasks to the group, or remove it',
        );
      }
    }

    // Roots and leaves of a group, from the edges between its own members: explicit task refs
    // inside it, refs to groups nested in it (their leaves), and nested groups' own depends_on.
    const rootsMemo = new Map<GroupCtx, Set<number>>();
    const leavesMemo = new Map<GroupCtx, number[]>();
    const inProgress = new Set<GroupCtx>();
    const expandWithin = (ref: Ref, within: GroupCtx): number[] => {
      if (ref === undefined) return [];
      if ('task' in ref) {
        const i = tasks.get(ref.task)!;
        return contains(within, this.taskCtx[i] ?? null) ? [i] : [];
      }
      if (ref.group === within || !contains(within, ref.group)) return [];
      return leavesOf(ref.group);
    };
    const intraUpstreams = (i: number, g: GroupCtx): number[] => {
      const out: number[] = [];
      for (const { ref } of taskRefs[i] ?? []) out.push(...expandWithin(ref, g));
      for (let b = this.taskCtx[i] ?? null; b !== null && b !== g; b = b.parent) {
        if (!groupsById.has(b.id) || groupsById.get(b.id) !== b) continue;
        if (!rootsOf(b).has(i)) continue;
        for (const { ref } of groupRefs.get(b) ?? []) out.push(...expandWithin(ref, g));
      }
      return out;
    };
    function rootsOf(g: GroupCtx): Set<number> {
      let r = rootsMemo.get(g);
      if (r !== undefined) return r;
      if (inProgress.has(g)) return new Set();
      inProgress.add(g);
      r = new Set((members.get(g) ?? []).filter((i) => intraUpstreams(i, g).length === 0));
      inProgress.delete(g);
      rootsMemo.set(g, r);
      return r;
    }
    function leavesOf(g: GroupCtx): number[] {
      let l = leavesMemo.get(g);
      if (l !== undefined) return l;
      if (inProgress.has(g)) return [];
      inProgress.add(g);
      const ms = members.get(g) ?? [];
      const hasDown = new Set<number>();
      for (const i of ms) for (const u of intraUpstreams(i, g)) hasDown.add(u);
      l = ms.filter((i) => !hasDown.has(i));
      inProgress.delete(g);
      leavesMemo.set(g, l);
      return l;
    }

    const allNames = [...tasks.keys(), ...groupsById.keys()];
    spec.tasks.forEach((task, i) => {
      const out: string[] = [];
      const paths: string[] = [];
      const add = (id: string, path: string, explicit: boolean): void => {
        if (!explicit && out.includes(id)) return;
        out.push(id);
        paths.push(path);
      };
      const ctx = this.taskCtx[i] ?? null;
      for (const { raw, ref } of taskRefs[i] ?? []) {
        if (ref !== undefined && 'group' in ref && contains(ref.group, ctx)) {
          report(
            C.TASK_GROUP,
            raw.path,
            `task "${task.task_id}" depends on its own group "${ref.group.id}"`,
            'depend on tasks of the group instead, or move the task out of the group',
          );
          continue;
        }
        if (raw.kind === 'dep') {
          if (ref === undefined) add(raw.name, raw.path, true);
          else if ('task' in ref) add(ref.task, raw.path, true);
          else for (const l of leavesOf(ref.group)) add(spec.tasks[l]!.task_id, raw.path, false);
          continue;
        }
        if (ref === undefined || !('task' in ref)) {
          const guess = didYouMean(raw.name, allNames);
          report(
            raw.kind === 'setup' ? C.SETUP_TEARDOWN : C.EXPAND,
            raw.path,
            raw.kind === 'setup'
              ? `"${raw.name}" is not a task of this DAG, so it cannot be a setup of "${task.task_id}"`
              : `"${raw.name}" is not a task of this DAG, so "${task.task_id}" cannot map over its return value`,
            guess
              ? `did you mean "${guess}"?`
              : 'name a task of this DAG (its full id, or its name within the group)',
          );
          continue;
        }
        const up = spec.tasks[tasks.get(ref.task)!]!;
        if (raw.kind === 'setup' && up.setup !== true) {
          report(
            C.SETUP_TEARDOWN,
            raw.path,
            `"${ref.task}" is listed in the setups of "${task.task_id}" but is not a setup task`,
            `add setup: true to "${ref.task}", or remove it from setups`,
          );
          continue;
        }
        if (raw.kind === 'xcom' && raw.arg !== undefined) {
          const arg = task.expand?.[raw.arg];
          if (arg !== undefined && 'xcom' in arg) arg.xcom = ref.task;
        }
        add(ref.task, raw.path, false);
      }
      for (let g = ctx; g !== null; g = g.parent) {
        if (groupsById.get(g.id) !== g || !rootsOf(g).has(i)) continue;
        for (const { raw, ref } of groupRefs.get(g) ?? []) {
          if (ref === undefined) {
            add(raw.name, raw.path, true);
          } else if ('task' in ref) {
            add(ref.task, raw.path, false);
          } else if (contains(ref.group, g)) {
            report(
              C.TASK_GROUP,
              raw.path,
              `group "${g.id}" depends on a group it belongs to ("${ref.group.id}")`,
              "remove it from the group's depends_on",
            );
          } else {
            for (const l of leavesOf(ref.group)) add(spec.tasks[l]!.task_id, raw.path, false);
          }
        }
      }
      task.depends_on = out;
      this.depPaths[i] = paths;
    });

    if (this.groups.length > 0) {
      const list: TaskGroupSpec[] = [];
      for (const g of this.groups) {
        list.push({
          group_id: g.id,
          ...(g.parent !== null ? { parent: g.parent.id } : {}),
          ...(g.tooltip !== undefined ? { tooltip: g.tooltip } : {}),
        });
      }
      spec.task_groups = list;
    }
  }
}
