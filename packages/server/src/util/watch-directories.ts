import { watch, type FSWatcher } from 'node:fs';

export interface DirectoryWatch {
  close(): void;
}

/**
 * Calls `onChange` once a burst of events in any of `dirs` has settled for `debounceMs`.
 * Directories, not files: operator-provided files are often replaced by a rename (an editor's
 * save, `mv`, a Kubernetes Secret volume's `..data` symlink swap), and a watch on a file keeps
 * following the old inode, going quiet after the first replacement. The caller re-reads
 * whatever it cares about; an event is only a hint that something may have changed.
 */
export function watchDirectories(
  dirs: Iterable<string>,
  onChange: () => void,
  opts: { debounceMs?: number; onError?: (dir: string, err: Error) => void } = {},
): DirectoryWatch {
  const watchers: FSWatcher[] = [];
  let timer: NodeJS.Timeout | undefined;
  const fire = () => {
    clearTimeout(timer);
    timer = setTimeout(onChange, opts.debounceMs ?? 200);
    timer.unref();
  };
  for (const dir of new Set(dirs)) {
    const w = watch(dir, { persistent: false }, fire);
    w.on('error', (err) => opts.onError?.(dir, err));
    watchers.push(w);
  }
  return {
    close() {
      for (const w of watchers.splice(0)) w.close();
      clearTimeout(timer);
    },
  };
}
