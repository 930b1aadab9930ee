import { describe, it } from 'vitest';
import { POSTGRES_HOWTO, postgresAvailability, postgresRequired } from './databases.js';

const availability = await postgresAvailability();

/**
 * Registers a suite once per dialect: SQLite always; PostgreSQL when reachable. A missing
 * PostgreSQL fails the run under CI=true or LEOFLOW_TEST_REQUIRE_POSTGRES=1, and otherwise
 * skips that half with the reason printed.
 */
export function forEachDialect(
  name: string,
  register: (dialect: 'sqlite' | 'postgres') => void,
): void {
  describe(`${name} (sqlite)`, () => register('sqlite'));
  forPostgres(name, () => register('postgres'));
}

/**
 * Registers a suite that only means something on PostgreSQL (Pro's leadership), by the same
 * rule: required under CI, otherwise skipped with the reason printed, so a developer without a
 * PostgreSQL server can still run everything else.
 */
export function forPostgres(name: string, register: () => void): void {
  if (availability.ok) {
    describe(`${name} (postgres)`, register);
  } else if (postgresRequired()) {
    describe(`${name} (postgres)`, () => {
      it('requires PostgreSQL (LEOFLOW_TEST_REQUIRE_POSTGRES=1 or CI=true)', () => {
        throw new Error(
          `PostgreSQL is required but unreachable: ${availability.reason}. To fix: ${POSTGRES_HOWTO}.`,
        );
      });
    });
  } else {
    process.stderr.write(`${name} on postgres skipped: ${availability.reason}\n`);
    describe.skip(`${name} (postgres, unavailable)`, register);
  }
}
