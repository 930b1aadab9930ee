import type { LogStore } from '../store/ports/logs.js';
import type { LogLineRow } from '../store/types.js';
import type { LogLimits } from '../config/log-limits.js';

/**
 * The line number of the note that says how many lines the byte cap dropped: the largest value
 * the column holds in every dialect, so the note is always the attempt's last line.
 */
export const LOG_CAP_NOTE_LINE = 2_147_483_647;

const NOTE = /^(\d+) log lines \((\d+) bytes\) dropped/;

/** Cuts `message` to at most `maxBytes` UTF-8 bytes (on a character boundary) plus a marker. */
export function capLine(message: string, maxBytes: number): string {
  // A string of n UTF-16 units is at most 3n UTF-8 bytes: most lines need no encoding at all.
  if (message.length * 3 <= maxBytes) return message;
  const bytes = Buffer.from(message, 'utf8');
  if (bytes.length <= maxBytes) return message;
  let cut = maxBytes;
  // Back off continuation bytes so the head does not end inside a character.
  while (cut > 0 && (bytes[cut]! & 0xc0) === 0x80) cut--;
  return (
    `${bytes.subarray(0, cut).toString('utf8')} …[line truncated by the server: ` +
    `${bytes.length - cut} more bytes dropped (logs.max_line_bytes=${maxBytes})]`
  );
}

interface Budget {
  stored: number;
  droppedLines: number;
  droppedBytes: number;
}

interface Attempt {
  tenant_id: string;
  dag_run_id: string;
  task_id: string;
  /** absent is -1: a task that is not mapped */
  map_index?: number;
  try_number: number;
  task_instance_id: string;
  /** absent is generation 0, as in a minted token */
  dispatch_gen?: number;
}

/**
 * Per-attempt byte accounting for PushLogs, keyed by task instance, try and dispatch generation:
 * a batch of an old generation that the write's fence then refused (a requeue landed between
 * the fence read and the append) counts against its own generation, never the next one's. The
 * count lives in memory (bounded LRU) and is rebuilt from the store (the try's stored lines) the
 * first time an attempt is seen by this process, so a restart neither resets the cap nor forgets
 * how many lines it already dropped.
 */
export class AttemptLogBudgets {
  readonly #entries = new Map<string, Promise<Budget>>();

  constructor(
    private readonly store: LogStore,
    private readonly limits: LogLimits,
    private readonly maxEntries = 10_000,
  ) {}

  /**
   * Applies the line and byte caps to one batch (in order). Returns the rows to store and, when
   * the cap dropped anything so far, the note row to upsert at LOG_CAP_NOTE_LINE.
   */
  async admit(
    attempt: Attempt,
    rows: LogLineRow[],
    now: number,
  ): Promise<{ keep: LogLineRow[]; note: LogLineRow | undefined }> {
    const key = `${attempt.task_instance_id}#${attempt.try_number}#${attempt.dispatch_gen ?? 0}`;
    let entry = this.#entries.get(key);
    if (entry) {
      this.#entries.delete(key);
    } else {
      entry = this.#load(attempt);
      // A failed load is not cached: the next push tries again.
      entry.catch(() => this.#entries.delete(key));
    }
    this.#entries.set(key, entry);
    while (this.#entries.size > this.maxEntries) {
      const oldest = this.#entries.keys().next();
      if (oldest.done) break;
      this.#entries.delete(oldest.value);
    }
    const budget = await entry;

    const keep: LogLineRow[] = [];
    let droppedNow = 0;
    for (const row of rows) {
      if (row.line_number >= LOG_CAP_NOTE_LINE) continue;
      const message = capLine(row.message, this.limits.maxLineBytes);
      const size = Buffer.byteLength(message, 'utf8');
      if (budget.droppedLines > 0 || budget.stored + size > this.limits.maxBytesPerAttempt) {
        budget.droppedLines++;
        budget.droppedBytes += size;
        droppedNow++;
        continue;
      }
      budget.stored += size;
      keep.push(message === row.message ? row : { ...row, message });
    }
    if (droppedNow === 0) return { keep, note: undefined };
    return {
      keep,
      note: {
        tenant_id: attempt.tenant_id,
        dag_run_id: attempt.dag_run_id,
        task_id: attempt.task_id,
        map_index: attempt.map_index ?? -1,
        try_number: attempt.try_number,
        line_number: LOG_CAP_NOTE_LINE,
        time: now,
        stream: 'agent',
        message:
          `${budget.droppedLines} log lines (${budget.droppedBytes} bytes) dropped: this attempt's ` +
          `log reached logs.max_bytes_per_attempt (${this.limits.maxBytesPerAttempt} bytes); ` +
          'every line after that point was counted, not stored',
      },
    };
  }

  async #load(a: Attempt): Promise<Budget> {
    const [stored, note] = await Promise.all([
      this.store.logBytes(
        a.dag_run_id,
        a.task_id,
        a.try_number,
        LOG_CAP_NOTE_LINE,
        a.map_index ?? -1,
      ),
      this.store.readLogs(
        a.dag_run_id,
        a.task_id,
        a.try_number,
        LOG_CAP_NOTE_LINE - 1,
        1,
        a.map_index ?? -1,
      ),
    ]);
    const m = note[0] ? NOTE.exec(note[0].message) : null;
    return {
      stored,
      droppedLines: m ? Number(m[1]) : 0,
      droppedBytes: m ? Number(m[2]) : 0,
    };
  }
}
