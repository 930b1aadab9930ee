import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, dagSpecHash, sha256Hex, type DagSpec } from '@leoflow/core';
import { compileText, expectOk } from './helpers.js';

describe('sha256Hex', () => {
  // FIPS 180-2 appendix B and NIST CAVP short-message vectors.
  it.each([
    ['', 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'],
    ['abc', 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad'],
    [
      'abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq',
      '248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1',
    ],
    [
      'abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu',
      'cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1',
    ],
    [
      'The quick brown fox jumps over the lazy dog',
      'd7a8fbb307d7809469ca9abcb0082e4f8d5651e46d3cdb762d02d0bf37c9e592',
    ],
  ])('sha256(%j)', (input, hex) => {
    expect(sha256Hex(input)).toBe(hex);
  });

  it('one million "a"', () => {
    expect(sha256Hex('a'.repeat(1_000_000))).toBe(
      'cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0',
    );
  });

  it('hashes strings as UTF-8', () => {
    expect(sha256Hex('é → 😀')).toBe(createHash('sha256').update('é → 😀', 'utf8').digest('hex'));
  });

  it('agrees with node:crypto at every padding boundary', () => {
    for (let n = 0; n <= 200; n++) {
      const bytes = Uint8Array.from({ length: n }, (_, i) => (i * 31 + n) & 0xff);
      expect(sha256Hex(bytes), `length ${n}`).toBe(
        createHash('sha256').update(bytes).digest('hex'),
      );
    }
  });

  it('agrees with node:crypto on random input', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 2048 }), (bytes) => {
        expect(sha256Hex(bytes)).toBe(createHash('sha256').update(bytes).digest('hex'));
      }),
    );
  });
});

describe('canonicalJson', () => {
  it('sorts keys at every level and writes no whitespace', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: null, y: 'x' }], c: true } })).toBe(
      '{"a":{"c":true,"d":[3,{"y":"x","z":null}]},"b":1}',
    );
  });

  it('sorts by UTF-16 code units and escapes like JSON.stringify', () => {
    expect(canonicalJson({ é: 1, z: 2, Z: 3, '\n': 4 })).toBe('{"\\n":4,"Z":3,"z":2,"é":1}');
  });

  it('skips undefined members and refuses values JSON cannot hold', () => {
    expect(canonicalJson({ a: undefined, b: 1 })).toBe('{"b":1}');
    expect(() => canonicalJson(undefined)).toThrow(TypeError);
  });

  it('parses back to an equal value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        expect(JSON.parse(canonicalJson(v))).toEqual(JSON.parse(JSON.stringify(v)));
      }),
    );
  });
});

describe('dagSpecHash', () => {
  const spec = expectOk(
    compileText(`dag_id: h
schedule: "@daily"
params: {a: 1, b: [1, 2]}
tasks:
  - task_id: a
    command: echo a
    env: {X: "1", Y: "2"}
  - task_id: b
    command: echo b
    depends_on: [a]
`),
  ).spec;

  /** Same content, every object's keys in a random order. */
  function shuffleKeys(value: unknown, rand: () => number): unknown {
    if (Array.isArray(value)) return value.map((v) => shuffleKeys(v, rand));
    if (value === null || typeof value !== 'object') return value;
    const entries = Object.entries(value);
    for (let i = entries.length - 1; i > 0; i--) {
      const j = Math.floor(rand() * (i + 1));
      [entries[i], entries[j]] = [entries[j]!, entries[i]!];
    }
    return Object.fromEntries(entries.map(([k, v]) => [k, shuffleKeys(v, rand)]));
  }

  it('is a 64-character lower-case hex SHA-256 of the canonical JSON', () => {
    expect(dagSpecHash(spec)).toMatch(/^[0-9a-f]{64}$/);
    expect(dagSpecHash(spec)).toBe(createHash('sha256').update(canonicalJson(spec)).digest('hex'));
  });

  it('is stable under key reordering', () => {
    const h = dagSpecHash(spec);
    fc.assert(
      fc.property(fc.integer(), (seed) => {
        let s = seed;
        const rand = (): number => {
          s = (s * 1103515245 + 12345) & 0x7fffffff;
          return s / 0x80000000;
        };
        expect(dagSpecHash(shuffleKeys(spec, rand) as DagSpec)).toBe(h);
      }),
    );
  });

  it('is stable across a JSON round trip and recompilation', () => {
    expect(dagSpecHash(JSON.parse(JSON.stringify(spec)) as DagSpec)).toBe(dagSpecHash(spec));
  });

  it('changes when any value changes, including array order', () => {
    const h = dagSpecHash(spec);
    const edit = (f: (s: DagSpec) => void): string => {
      const c = JSON.parse(JSON.stringify(spec)) as DagSpec;
      f(c);
      return dagSpecHash(c);
    };
    expect(edit((s) => (s.tasks[0]!.env.X = '2'))).not.toBe(h);
    expect(edit((s) => s.tasks.reverse())).not.toBe(h);
    expect(edit((s) => (s.params.b = [2, 1]))).not.toBe(h);
    expect(edit((s) => (s.description = ' '))).not.toBe(h);
  });
});
