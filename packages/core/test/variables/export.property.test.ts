import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseAirflowVariablesExport } from '@leoflow/core';

const key = fc
  .string({ unit: 'binary', minLength: 1, maxLength: 12 })
  .filter((k) => k.trim() !== '');
// Values as an export holds them; a wrapper object {"value": …} is exercised separately.
const value = fc
  .jsonValue({ maxDepth: 3 })
  .filter((v) => !(typeof v === 'object' && v !== null && !Array.isArray(v) && 'value' in v));

describe('parseAirflowVariablesExport (property)', () => {
  it('every entry survives: strings verbatim, other values as JSON meaning the same', () => {
    fc.assert(
      fc.property(fc.dictionary(key, value, { maxKeys: 8 }), (obj) => {
        const got = parseAirflowVariablesExport(JSON.stringify(obj, null, 4));
        expect(got.map((v) => v.key)).toEqual(Object.keys(obj));
        for (const { key: k, value: stored } of got) {
          const original = obj[k];
          if (typeof original === 'string') expect(stored).toBe(original);
          else expect(JSON.parse(stored)).toEqual(JSON.parse(JSON.stringify(original)));
        }
      }),
      { numRuns: 500 },
    );
  });

  it('the stored JSON is ASCII with two-space indentation, as Python writes it', () => {
    fc.assert(
      fc.property(
        fc.dictionary(key, fc.array(fc.string({ unit: 'binary' }), { minLength: 1 })),
        (obj) => {
          for (const { value: stored } of parseAirflowVariablesExport(JSON.stringify(obj))) {
            expect(stored).toMatch(/^[\x20-\x7e\n]*$/);
            expect(stored.split('\n')[1]).toMatch(/^ {2}\S/);
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
