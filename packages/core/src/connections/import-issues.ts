import type { ErrorCodeOf } from '../errors/catalogue.js';
import { isLeoflowError, VaultError } from '../errors/leoflow-error.js';

/** One problem in an import source: which entry and where, never the entry's value. */
export interface ImportIssue {
  /** The connection id or variable key, when it could be read and is a valid name. */
  id: string | null;
  /** 1-based line in the file, when the source has lines. */
  line: number | null;
  /** The env var holding the entry, for environment imports. */
  envVar?: string;
  problem: string;
}

const MAX_LISTED = 20;

/**
 * All problems of a source are reported together so a migration can be fixed in one pass.
 * `details.issues` carries them structured for the CLI.
 */
export function importError(
  code: ErrorCodeOf<'vault'>,
  source: string,
  issues: ImportIssue[],
): VaultError {
  const listed = issues.slice(0, MAX_LISTED).map(describe);
  const more = issues.length > MAX_LISTED ? `; … and ${issues.length - MAX_LISTED} more` : '';
  const n = issues.length === 1 ? '1 problem' : `${issues.length} problems`;
  return new VaultError(
    code,
    `${source} has ${n}, nothing was imported: ${listed.join('; ')}${more}. Fix the entries named and import again.`,
    { issues },
  );
}

function describe(i: ImportIssue): string {
  const where: string[] = [];
  if (i.envVar !== undefined) where.push(i.envVar);
  if (i.line !== null) where.push(`line ${i.line}`);
  if (i.id !== null && i.envVar === undefined) where.push(`"${i.id}"`);
  return where.length > 0 ? `${where.join(', ')}: ${i.problem}` : i.problem;
}

/** A problem with one entry, in fixed text that quotes nothing from the entry. */
export class EntryProblem extends Error {
  constructor(readonly problem: string) {
    super(problem);
    this.name = 'EntryProblem';
  }
}

/** The safe problem text of a codec error (its `details.problem`), for aggregation. */
export function problemOf(e: unknown): string {
  if (e instanceof EntryProblem) return e.problem;
  if (isLeoflowError(e) && typeof e.details['problem'] === 'string') return e.details['problem'];
  if (isLeoflowError(e)) return e.message;
  throw e;
}

/**
 * Airflow's `sanitize_conn_id`: word characters plus `# ! ( ) - . : / \`, 1-250 of them.
 * Python's `\w` is Unicode-aware, hence the property classes.
 */
const CONN_ID = /^[\p{L}\p{N}_#!()\-.:/\\]{1,250}$/u;

export function isValidConnId(id: string): boolean {
  return CONN_ID.test(id);
}

export const CONN_ID_RULE =
  'the connection id is not valid: use letters, digits and _ # ! ( ) - . : / \\ (1-250 characters, no spaces)';
