import { closeSync, readdirSync, readFileSync } from 'node:fs';

const O_CLOEXEC = 0o2000000;

/**
 * Closes every descriptor this process inherited without close-on-exec, but 0-2 and `keep`
 * (the token pipe): what whatever started the control plane left open (an fd 251, say) must not
 * reach a task. Node opens its own descriptors close-on-exec, so any other one is inherited.
 * The sandbox helper closes everything but 0-2 before the task's exec anyway; this also covers
 * an agent that runs without it. Returns the fds it closed.
 */
export function closeInheritedFds(keep: readonly number[] = []): number[] {
  const closed: number[] = [];
  let fds: string[];
  try {
    fds = readdirSync('/proc/self/fd');
  } catch {
    return closed;
  }
  for (const name of fds) {
    const fd = Number(name);
    if (!Number.isInteger(fd) || fd <= 2 || keep.includes(fd)) continue;
    let flags: number;
    try {
      const info = readFileSync(`/proc/self/fdinfo/${fd}`, 'latin1');
      flags = parseInt(/^flags:\s+([0-7]+)/m.exec(info)?.[1] ?? '0', 8);
    } catch {
      continue; // the directory's own fd, gone by now
    }
    if ((flags & O_CLOEXEC) !== 0) continue;
    try {
      closeSync(fd);
      closed.push(fd);
    } catch {
      // not ours to close after all
    }
  }
  return closed;
}
