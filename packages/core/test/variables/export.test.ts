import { describe, expect, it } from 'vitest';
import { isLeoflowError, parseAirflowVariablesExport, type ImportIssue } from '@leoflow/core';

// A file as `airflow variables export` writes it (json.dump(…, sort_keys=True, indent=4)), plus
// hand-edited entries covering every value kind Python's json reads.
const EXPORT = String.raw`{
    "api_token": "tok-123",
    "big": 12345678901234567890,
    "config": {"b": 1.0, "a": [1e16, 1e15, 0.0001, 0.00001, -0.0, 1E5, 1.10], "10": {}, "2": [], "uni": "é😀\u007f\n\"\\/", "n": null, "t": true},
    "described": {"value": {"x": 1}, "description": "wrapped"},
    "dup": 1,
    "dup": 2,
    "float": 3.14,
    "inf": Infinity,
    "list": [1, "two", [3]],
    "nan": NaN,
    "neg_zero_int": -0,
    "null_value": null,
    "plain": "hello",
    "string_of_json": "{\"a\": 1}",
    "text_value": {"value": "just text", "description": null}
}`;

// What Airflow 2.x/3.x `variables import` stores for each entry, computed with CPython 3.11
// (Variable.set(k, v, serialize_json=not isinstance(v, str)) → json.dumps(v, indent=2)).
const STORED = [
  { key: 'api_token', value: 'tok-123' },
  { key: 'big', value: '12345678901234567890' },
  {
    key: 'config',
    value:
      '{\n  "b": 1.0,\n  "a": [\n    1e+16,\n    1000000000000000.0,\n    0.0001,\n    1e-05,\n    -0.0,\n    100000.0,\n    1.1\n  ],\n  "10": {},\n  "2": [],\n  "uni": "\\u00e9\\ud83d\\ude00\\u007f\\n\\"\\\\/",\n  "n": null,\n  "t": true\n}',
  },
  { key: 'described', value: '{\n  "x": 1\n}', description: 'wrapped' },
  { key: 'dup', value: '2' },
  { key: 'float', value: '3.14' },
  { key: 'inf', value: 'Infinity' },
  { key: 'list', value: '[\n  1,\n  "two",\n  [\n    3\n  ]\n]' },
  { key: 'nan', value: 'NaN' },
  { key: 'neg_zero_int', value: '0' },
  { key: 'null_value', value: 'null' },
  { key: 'plain', value: 'hello' },
  { key: 'string_of_json', value: '{"a": 1}' },
  { key: 'text_value', value: 'just text' },
];

function issuesOf(text: string): ImportIssue[] {
  try {
    parseAirflowVariablesExport(text);
  } catch (e) {
    expect(isLeoflowError(e)).toBe(true);
    if (!isLeoflowError(e)) return [];
    expect(e.code).toBe('LF_VAR_IMPORT_INVALID');
    expect(e.message).not.toContain('hunter2');
    expect(JSON.stringify(e.details)).not.toContain('hunter2');
    return e.details['issues'] as ImportIssue[];
  }
  throw new Error('expected an error');
}

describe('parseAirflowVariablesExport', () => {
  it('stores exactly what Airflow stores, byte for byte', () => {
    expect(parseAirflowVariablesExport(EXPORT)).toEqual(STORED);
  });

  it('keeps file order; a repeated key keeps its first position and last value', () => {
    expect(parseAirflowVariablesExport('{"b": "1", "10": "2", "b": "3"}')).toEqual([
      { key: 'b', value: '3' },
      { key: '10', value: '2' },
    ]);
  });

  it('reads the export with a UTF-8 BOM', () => {
    expect(parseAirflowVariablesExport('\ufeff{"a": "b"}')).toEqual([{ key: 'a', value: 'b' }]);
  });

  it('an empty object is an empty import', () => {
    expect(parseAirflowVariablesExport('{}')).toEqual([]);
  });

  it.each([
    ['empty file', '', 1, /empty/],
    ['not an object', '["hunter2"]', 1, /one object/],
    [
      'syntax error on line 3',
      '{\n  "a": "b",\n  "c": hunter2\n}',
      3,
      /^not valid JSON: expected a value/,
    ],
    ['trailing comma', '{\n  "a": "hunter2",\n}', 3, /property name/],
    ['raw control character in a string', '{"a": "hunter2\u0001"}', 1, /control character/],
    ['unterminated string', '{"a": "hunter2', 1, /unterminated/],
    ['extra data', '{"a": "hunter2"} x', 1, /after the JSON value/],
  ])('%s → LF_VAR_IMPORT_INVALID at its line, without the text', (_, text, line, problem) => {
    const issues = issuesOf(text);
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatchObject({ id: null, line });
    expect(issues[0]!.problem).toMatch(problem);
  });

  it('entry problems name the key and line', () => {
    expect(
      issuesOf(
        '{\n  "ok": "x",\n  "": "hunter2",\n  "d": {"value": "hunter2", "description": 5}\n}',
      ),
    ).toEqual([
      { id: null, line: 3, problem: 'a variable key is empty' },
      { id: 'd', line: 4, problem: 'description must be a string or null' },
    ]);
  });
});
