import { readdirSync, statSync, watch, type FSWatcher } from 'node:fs';
import { join } from 'node:path';

/** How deep under the DAGs folder a change is noticed (a DAG folder, its scripts' folders). */
const MAX_DEPTH = 4;
/** Past this many entries the poll stops walking (a DAGs folder is not a data store). */
const MAX_ENTRIES = 20_000;

/**
 * What the folder looks like, cheaply: every entry's path, kind, size, mtime and inode, down to
 * MAX_DEPTH. Two equal fingerprints mean nothing a DAG reads has changed.
 */
export function folderFingerprint(folder: string): string {
  const parts: string[] = [];
  const walk = (dir: string, rel: string, depth: number) => {
    let names: string[];
    try {
      names = readdirSync(dir).sort();
    } catch {
      parts.push(`${rel}:unreadable`);
      return;
    }
    for (const name of names) {
      if (parts.length >= MAX_ENTRIES) return;
      const p = join(dir, name);
      const r = rel ? `${rel}/${name}` : name;
      try {
        const st = statSync(p);
        parts.push(`${r}:${st.isDirectory() ? 'd' : 'f'}:${st.size}:${st.mtimeMs}:${st.ino}`);
        if (st.isDirectory() && depth < MAX_DEPTH) walk(p, r, depth + 1);
      } catch {
        parts.push(`${r}:dangling`);
      }
    }
  };
  walk(folder, '', 1);
  return parts.join('\n');
}

export interface FolderWatcherOptions {
  /** the poll that catches what fs.watch misses (or all of it, where fs.watch is unavailable) */
  pollMs: number;
  /** quiet time after the last event before a sync: an editor's save is several events */
  debounceMs?: number;
  /** false: poll only (tests of the fallback; file systems where inotify does not work) */
  useFsWatch?: boolean;
  onError: (err: unknown) => void;
}

/**
 * Watches a DAGs folder and calls `sync` when something in it changed: fs.watch (recursive)
 * events, debounced, plus a poll of the folder's fingerprint as the fallback. Syncs never
 * overlap: a change during a sync runs one more after it.
 */
export class DagsFolderWatcher {
  readonly #folder: string;
  readonly #sync: () => Promise<void>;
  readonly #opts: Required<FolderWatcherOptions>;
  #fingerprint = '';
  #watcher: FSWatcher | null = null;
  #poll: NodeJS.Timeout | null = null;
  #debounce: NodeJS.Timeout | null = null;
  #running: Promise<void> | null = null;
  #again = false;
  #stopped = false;

  constructor(folder: string, sync: () => Promise<void>, opts: FolderWatcherOptions) {
    this.#folder = folder;
    this.#sync = sync;
    this.#opts = { debounceMs: 300, useFsWatch: true, ...opts };
  }

  /** whether fs.watch is in use (false: polling only) */
  get watching(): boolean {
    return this.#watcher !== null;
  }

  /** The first sync (awaited: the DAGs are there when start returns), then the watch. */
  async start(): Promise<void> {
    this.#fingerprint = folderFingerprint(this.#folder);
    await this.#sync();
    if (this.#opts.useFsWatch) {
      try {
        this.#watcher = watch(this.#folder, { recursive: true, persistent: false }, () =>
          this.#schedule(),
        );
        this.#watcher.on('error', () => {
          // The folder went away or inotify ran out: the poll carries on alone.
          this.#watcher?.close();
          this.#watcher = null;
        });
      } catch {
        this.#watcher = null;
      }
    }
    this.#poll = setInterval(() => this.#check(), this.#opts.pollMs);
    this.#poll.unref();
  }

  #schedule(): void {
    if (this.#stopped) return;
    if (this.#debounce) clearTimeout(this.#debounce);
    this.#debounce = setTimeout(() => {
      this.#debounce = null;
      this.#check();
    }, this.#opts.debounceMs);
    this.#debounce.unref();
  }

  #check(): void {
    if (this.#stopped) return;
    const now = folderFingerprint(this.#folder);
    if (now === this.#fingerprint) return;
    this.#fingerprint = now;
    this.#run();
  }

  #run(): void {
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = this.#sync()
      .catch((err: unknown) => this.#opts.onError(err))
      .finally(() => {
        this.#running = null;
        if (this.#again && !this.#stopped) {
          this.#again = false;
          this.#run();
        }
      });
  }

  /** Stops watching and waits for a sync in progress. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#poll) clearInterval(this.#poll);
    if (this.#debounce) clearTimeout(this.#debounce);
    this.#watcher?.close();
    this.#watcher = null;
    await this.#running;
  }
}
