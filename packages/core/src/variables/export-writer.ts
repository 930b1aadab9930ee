import {
  compareCodePoints,
  pyJsonDumps,
  type PyJson,
  type PyJsonEntry,
} from '../connections/py-json.js';

/**
 * A file for `airflow variables import`: `{key: value}` with every value a JSON string, laid out
 * as `airflow variables export` lays its file out (`json.dump(…, sort_keys=True, indent=4)`).
 * Airflow stores a string exactly as given, so the import holds Leoflow's values byte for byte
 * (checked by the Airflow oracle). Airflow's own export instead writes a value that parses as
 * JSON as that JSON, which its import re-serialises (`" 123"` comes back as `"123"`); Leoflow
 * never writes a value as anything but the string it is.
 */
export function formatAirflowVariablesExport(
  variables: ReadonlyMap<string, string> | Record<string, string>,
): string {
  const entries: [string, string][] = (
    variables instanceof Map
      ? [...(variables as ReadonlyMap<string, string>)]
      : Object.entries(variables as Record<string, string>)
  ).sort(([a], [b]) => compareCodePoints(a, b));
  const root = new Map<string, PyJsonEntry>();
  for (const [key, value] of entries) {
    const node: PyJson = { kind: 'string', value };
    root.set(key, { value: node, line: 1 });
  }
  return pyJsonDumps({ kind: 'object', entries: root }, 4);
}
