import { VaultError } from '../errors/leoflow-error.js';

/**
 * Secret grants (issue 34): a Variable or Connection may name the DAGs that may declare it, as a
 * list of anchored, case-sensitive globs on the DAG id — `*` any run of characters (none
 * included), `?` exactly one; every other character stands for itself. `null` (the default) grants
 * it to every DAG of the tenant; an empty list to none. Like Kubernetes RBAC `resourceNames` or a
 * GitHub environment's deployment branch rules: the grant names who may ask, the declaration
 * asks, and both registration and delivery check it.
 */
export type SecretGrants = readonly string[] | null;

/** At most this many patterns per secret, each at most this long. */
export const MAX_GRANT_PATTERNS = 100;
export const MAX_GRANT_PATTERN_LENGTH = 200;

/** A DAG id's characters (spec.ts ID_PATTERN) plus the two wildcards. */
const PATTERN_CHARS = /^[a-zA-Z0-9_.*?-]+$/;

/** Why each pattern of `patterns` cannot be a grant; empty when every one can. */
export function grantProblems(patterns: unknown): string[] {
  if (patterns === null) return [];
  if (!Array.isArray(patterns)) return ['grants must be a list of DAG id patterns, or null'];
  const out: string[] = [];
  if (patterns.length > MAX_GRANT_PATTERNS)
    out.push(`at most ${MAX_GRANT_PATTERNS} patterns (got ${patterns.length})`);
  patterns.forEach((p: unknown, i) => {
    if (typeof p !== 'string') {
      out.push(`pattern ${i + 1} is not a string`);
    } else if (p === '') {
      out.push(`pattern ${i + 1} is empty`);
    } else if (p.length > MAX_GRANT_PATTERN_LENGTH) {
      out.push(`pattern ${i + 1} is longer than ${MAX_GRANT_PATTERN_LENGTH} characters`);
    } else if (!PATTERN_CHARS.test(p)) {
      out.push(
        `pattern ${JSON.stringify(p)} may use only a DAG id's characters (letters, digits, _ . -) and the wildcards * and ?`,
      );
    }
  });
  return out;
}

/**
 * The grants as given, validated: duplicates dropped, order kept. Throws
 * LF_SECRET_GRANT_INVALID naming every problem (nothing is written by the caller then).
 */
export function parseGrants(patterns: unknown, what: string): SecretGrants {
  const problems = grantProblems(patterns);
  if (problems.length > 0) {
    throw new VaultError(
      'LF_SECRET_GRANT_INVALID',
      `the grants of ${what} are refused: ${problems.join('; ')}. Give a list of DAG id patterns (* and ? are the only wildcards; matching is anchored and case-sensitive), [] for no DAG, or null for every DAG.`,
    );
  }
  return patterns === null ? null : [...new Set(patterns as string[])];
}

/** One pattern as an anchored regular expression (every character but * and ? literal). */
function patternSource(p: string): string {
  let out = '';
  for (const ch of p) {
    if (ch === '*') out += '.*';
    else if (ch === '?') out += '.';
    else out += ch.replace(/[.\\+^$(){}[\]|/-]/g, '\\$&');
  }
  return out;
}

/**
 * A matcher for a list of patterns, built once (one combined regular expression). A DAG id is
 * granted when one pattern matches it whole; null grants every DAG id, [] none.
 */
export function grantMatcher(grants: SecretGrants): (dagId: string) => boolean {
  if (grants === null) return ALL;
  if (grants.length === 0) return NONE;
  const key = grants.join('\u0000');
  let m = compiled.get(key);
  if (m === undefined) {
    const re = new RegExp(`^(?:${grants.map(patternSource).join('|')})$`, 's');
    m = (dagId) => re.test(dagId);
    // Delivery checks grants on every fetch: a secret's matcher is built once, not per call.
    if (compiled.size >= 1_000) compiled.clear();
    compiled.set(key, m);
  }
  return m;
}

const ALL = (): boolean => true;
const NONE = (): boolean => false;
const compiled = new Map<string, (dagId: string) => boolean>();

/** Whether `dagId` may declare a secret with these grants. */
export function isGrantedTo(grants: SecretGrants, dagId: string): boolean {
  return grantMatcher(grants)(dagId);
}

export const SECRET_NOT_GRANTED_CODE = 'LF_SECRET_NOT_GRANTED';

/** The refusal's sentence (without the code): which secrets, for which DAG, what to do. */
export function notGrantedMessage(
  dagId: string,
  kind: 'variables' | 'connections',
  names: readonly string[],
): string {
  const noun = kind === 'variables' ? 'variable' : 'connection';
  const cmd =
    kind === 'variables' ? 'leoflow variables set-grants' : 'leoflow connections set-grants';
  return (
    `dag "${dagId}" declares ${noun}(s) ${names.join(', ')} not granted to it; ask an admin to ` +
    `add a pattern matching "${dagId}" to the grants (${cmd}) or remove them from the declaration`
  );
}
