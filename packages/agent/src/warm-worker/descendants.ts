import { readdirSync, readFileSync } from 'node:fs';

/** The live (not zombie) processes whose parent chain leads to `root`, `root` excluded. */
export function descendantsOf(root: number): number[] {
  const children = new Map<number, number[]>();
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    const stat = statOf(Number(e));
    if (!stat || stat.state === 'Z' || stat.state === 'X') continue;
    const list = children.get(stat.ppid) ?? [];
    list.push(Number(e));
    children.set(stat.ppid, list);
  }
  const out: number[] = [];
  const todo = [...(children.get(root) ?? [])];
  while (todo.length > 0) {
    const pid = todo.pop()!;
    out.push(pid);
    todo.push(...(children.get(pid) ?? []));
  }
  return out;
}

function statOf(pid: number): { state: string; ppid: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: rest[0] ?? '', ppid: Number(rest[1]) };
  } catch {
    return undefined;
  }
}

/**
 * SIGKILLs every descendant of this process and waits (bounded) for them to go; the pids still
 * alive afterwards. Between a warm worker's attempts nothing else is its descendant, so all of
 * them are the previous attempt's. A process that left the tree (setsid plus a double fork, so
 * it was re-parented) is found only when this process is the pod's PID 1, where orphans land.
 */
export async function killDescendants(root = process.pid, waitMs = 2_000): Promise<number[]> {
  const until = Date.now() + waitMs;
  let left = descendantsOf(root);
  while (left.length > 0) {
    for (const pid of left) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    if (Date.now() >= until) break;
    await new Promise((r) => setTimeout(r, 20));
    left = descendantsOf(root);
  }
  return left;
}
