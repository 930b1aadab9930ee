import { importError, type ImportIssue } from '../connections/import-issues.js';
import {
  parsePyJson,
  pyJsonDumps,
  PyJsonSyntaxError,
  type PyJson,
} from '../connections/py-json.js';

export interface ImportedVariable {
  key: string;
  /** Exactly the string Airflow would store for this entry. */
  value: string;
  /** Airflow's variable description, when the file has a non-empty one. */
  description?: string;
}

/**
 * Reads the file `airflow variables export` writes: a JSON object `key → value`. As
 * `airflow variables import` does, a string value is stored verbatim and any other value is
 * stored as `json.dumps(value, indent=2)` (`Variable.set(..., serialize_json=True)`), reproduced
 * byte for byte — Python's number formatting and key order included. An object with a `value`
 * key is the export's wrapper `{"value": …, "description": …}` and is unwrapped.
 *
 * Every problem is collected and thrown at once as `LF_VAR_IMPORT_INVALID`, naming the line and
 * key, never a value.
 */
export function parseAirflowVariablesExport(text: string): ImportedVariable[] {
  const issues: ImportIssue[] = [];
  const out = read(text, issues);
  if (issues.length > 0) throw importError('LF_VAR_IMPORT_INVALID', 'the variables file', issues);
  return out;
}

function read(text: string, issues: ImportIssue[]): ImportedVariable[] {
  if (typeof text !== 'string' || text.trim() === '') {
    issues.push({ id: null, line: 1, problem: 'the file is empty' });
    return [];
  }
  let root: PyJson;
  try {
    root = parsePyJson(text);
  } catch (e) {
    if (!(e instanceof PyJsonSyntaxError)) throw e;
    issues.push({
      id: null,
      line: e.line,
      problem: `not valid JSON: ${e.problem} (column ${e.column})`,
    });
    return [];
  }
  if (root.kind !== 'object') {
    issues.push({ id: null, line: 1, problem: 'the file must hold one object of key → value' });
    return [];
  }
  const out: ImportedVariable[] = [];
  for (const [key, { value, line }] of root.entries) {
    if (key.trim() === '') {
      issues.push({ id: null, line, problem: 'a variable key is empty' });
      continue;
    }
    let v = value;
    let description = '';
    const wrapped = v.kind === 'object' ? v.entries.get('value') : undefined;
    if (v.kind === 'object' && wrapped !== undefined) {
      const d = v.entries.get('description')?.value;
      if (d !== undefined && d.kind !== 'null' && d.kind !== 'string') {
        issues.push({ id: key, line, problem: 'description must be a string or null' });
        continue;
      }
      description = d?.kind === 'string' ? d.value : '';
      v = wrapped.value;
    }
    const stored = v.kind === 'string' ? v.value : pyJsonDumps(v, 2);
    out.push(description === '' ? { key, value: stored } : { key, value: stored, description });
  }
  return out;
}
