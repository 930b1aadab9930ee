import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

// What a contract test reads off this host to see where an attempt's credential went: the
// agent's process tree (/proc), the files under a directory, whether a pid lives.

/** pid → parent pid, for every process on this host. */
function parents(): Map<number, number> {
  const out = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      out.set(Number(name), ppid);
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** The agent and every process below it (the task and what it started). */
export function processTree(root: number): number[] {
  const ppid = parents();
  const tree = [root];
  for (let grew = true; grew;) {
    grew = false;
    for (const [pid, parent] of ppid) {
      if (tree.includes(parent) && !tree.includes(pid)) {
        tree.push(pid);
        grew = true;
      }
    }
  }
  return tree.filter((pid) => ppid.has(pid));
}

/**
 * The agent has started its task: a process below it has exec'd. A child caught between fork and
 * exec still shows the agent's argv and initial environment (under the envvar transport, the
 * token) — it is the agent's own code, not the task's, so the contract reads only after exec.
 */
export function taskStarted(agent: number): boolean {
  const [root, ...below] = processTree(agent);
  if (root === undefined || below.length === 0) return false;
  const agentArgv = readOr(`/proc/${root}/cmdline`);
  return below.every((pid) => readOr(`/proc/${pid}/cmdline`) !== agentArgv);
}

export function readOr(file: string): string {
  try {
    return readFileSync(file, 'latin1');
  } catch {
    return '';
  }
}

export function filesBelow(dir: string, out: string[] = []): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return out;
  }
  for (const name of names) {
    const path = join(dir, name);
    try {
      const st = statSync(path);
      if (st.isDirectory()) filesBelow(path, out);
      else if (st.isFile() && st.size <= 8 * 1024 * 1024) out.push(readOr(path));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
