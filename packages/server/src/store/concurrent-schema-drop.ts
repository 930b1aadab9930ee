/**
 * Kysely's Migrator asks "does my bookkeeping table exist?" with a catalog query over every
 * schema of the database (`has_schema_privilege` per schema). When another schema of the same
 * database is dropped while that query runs (another cell's store removed, parallel test files
 * each dropping their own), PostgreSQL answers `schema "<the other one>" does not exist` and the
 * migration fails although nothing is wrong with ours. Retries such a failure a few times; any
 * other error, or one naming our own schema, is thrown at once.
 */
export async function retryingForeignSchemaDrops<T>(
  ownSchema: string,
  attempt: () => Promise<T>,
  tries = 5,
): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await attempt();
    } catch (err) {
      const dropped = droppedSchemaNamed(err);
      if (i >= tries || dropped === null || dropped === ownSchema) throw err;
    }
  }
}

/** Whether an error is another schema dropped under the catalog query (see above). */
export function isForeignDrop(err: unknown, ownSchema: string): boolean {
  const dropped = droppedSchemaNamed(err);
  return dropped !== null && dropped !== ownSchema;
}

function droppedSchemaNamed(err: unknown): string | null {
  for (let e: unknown = err; e instanceof Error; e = (e as { cause?: unknown }).cause) {
    const m = /schema "([^"]+)" does not exist/.exec(e.message);
    if (m) return m[1]!;
  }
  return null;
}
