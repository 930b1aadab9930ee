/**
 * Import and export on the Variables and Connections pages: the pure parts (what goes into an
 * export file, what a pasted file holds), so the components stay thin and these are unit-tested.
 */

/** One line of an import's outcome, per Variable or Connection. */
export interface ImportOutcome {
  name: string;
  ok: boolean;
  /** the server's message (and code) when it refused this one */
  message: string;
}

export interface ListedVariable {
  key: string;
  value: unknown;
  masked: boolean;
}

/**
 * An `airflow variables export` file from what the list already carries: every value the list
 * shows, and no secret (those are masked in the list; their keys are named in `omitted`).
 */
export function variablesWithoutSecrets(list: readonly ListedVariable[]): {
  doc: Record<string, string>;
  omitted: string[];
} {
  const doc: Record<string, string> = {};
  const omitted: string[] = [];
  for (const v of list) {
    if (v.masked) omitted.push(v.key);
    else doc[v.key] = typeof v.value === 'string' ? v.value : JSON.stringify(v.value);
  }
  return { doc, omitted };
}

export interface ListedConnection {
  conn_id: string;
  conn_type: string;
  host: string | null;
  login: string | null;
  schema: string | null;
  port: number | null;
  description: string;
}

/**
 * An `airflow connections export` JSON file from the list: the fields the list shows, without
 * the password and without `extra` (whose secret fields the list redacts: re-importing the
 * redaction would overwrite the real values).
 */
export function connectionsWithoutSecrets(
  list: readonly ListedConnection[],
): Record<string, Record<string, unknown>> {
  return Object.fromEntries(
    list.map((c) => [
      c.conn_id,
      {
        conn_type: c.conn_type,
        description: c.description,
        host: c.host,
        login: c.login,
        password: null,
        schema: c.schema,
        port: c.port,
        extra: null,
      },
    ]),
  );
}

/** The server's full export (`POST /api/v1/connections/export`) as Airflow writes it: extra as a JSON string. */
export function connectionsAsAirflowJson(
  connections: Record<string, { extra?: Record<string, unknown> | null } & Record<string, unknown>>,
): Record<string, Record<string, unknown>> {
  return Object.fromEntries(
    Object.entries(connections).map(([id, c]) => [
      id,
      { ...c, extra: c.extra === null || c.extra === undefined ? null : JSON.stringify(c.extra) },
    ]),
  );
}

/** Offers `doc` as a file download; the text goes to a blob, never into the page. */
export function downloadJson(fileName: string, doc: unknown): void {
  const url = URL.createObjectURL(
    new Blob([`${JSON.stringify(doc, null, 2)}\n`], { type: 'application/json' }),
  );
  const a = document.createElement('a');
  a.href = url;
  a.download = fileName;
  a.rel = 'noopener';
  document.body.append(a);
  a.click();
  a.remove();
  // The click has started the download; the URL is not needed after this task.
  setTimeout(() => URL.revokeObjectURL(url), 0);
}

/** Runs `each` for every item in order (one request at a time) and reports each outcome. */
export async function importEach<T>(
  items: readonly T[],
  nameOf: (item: T) => string,
  each: (item: T) => Promise<unknown>,
  onProgress: (outcomes: ImportOutcome[]) => void,
): Promise<ImportOutcome[]> {
  const outcomes: ImportOutcome[] = [];
  for (const item of items) {
    try {
      await each(item);
      outcomes.push({ name: nameOf(item), ok: true, message: 'imported' });
    } catch (e) {
      const code = (e as { code?: unknown }).code;
      const msg = e instanceof Error ? e.message : String(e);
      outcomes.push({
        name: nameOf(item),
        ok: false,
        message: typeof code === 'string' ? `${msg} (${code})` : msg,
      });
    }
    onProgress([...outcomes]);
  }
  return outcomes;
}
