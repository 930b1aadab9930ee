import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  formatConnectionUri,
  isLeoflowError,
  normalizeConnection,
  parseConnectionUri,
  type Connection,
} from '@leoflow/core';

const HOSTILE = [
  ...'%@:/?#&=+ []!*\'()~.;,$"<>\\^`{|}\t\n',
  'é',
  'ß',
  '密',
  '😀',
  '\u0000',
  '\u00a0',
  '%2F',
  '%zz',
  '://',
  'a',
  'Z',
  '0',
];

/** Well-formed strings mixing hostile characters and arbitrary unicode. */
const text = fc.oneof(
  fc.string({ unit: fc.constantFrom(...HOSTILE), minLength: 1, maxLength: 16 }),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 16 }),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 8 }),
);
const field = fc.option(text, { nil: null });

/** conn_types the URI carries unchanged: lower case, "_" not "-", not "postgresql". */
const connType = fc.oneof(
  fc.constantFrom('postgres', 'mysql', 'http', 'generic', 'google_cloud_platform', 'a.b+c'),
  fc.stringMatching(/^[a-z][a-z0-9_+.]{0,15}$/).filter((t) => t !== 'postgresql'),
);

const jsonObject = fc
  .dictionary(text, fc.jsonValue({ maxDepth: 3 }), { maxKeys: 5 })
  // JSON itself cannot tell -0 from 0; the wire format is JSON.
  .map((o) => JSON.parse(JSON.stringify(o)) as Record<string, unknown>);
const extra = fc.option(
  fc.oneof(fc.dictionary(text, text, { maxKeys: 5 }), jsonObject, fc.constant({})),
  { nil: null },
);

const connection: fc.Arbitrary<Connection> = fc.record({
  conn_type: connType,
  host: field,
  login: field,
  password: field,
  schema: field,
  port: fc.option(fc.integer({ min: 0, max: 65535 }), { nil: null }),
  extra,
});

describe('URI round trip (property)', () => {
  it('parseConnectionUri(formatConnectionUri(c)) deep-equals c for every c in the form Airflow reads', () => {
    // normalizeConnection(c) is that form (host/schema "" not None, host case as urlsplit gives
    // it, …); it is a fixed point of normalizeConnection and survives the round trip unchanged.
    fc.assert(
      fc.property(connection.map(normalizeConnection), (c) => {
        expect(normalizeConnection(c)).toEqual(c);
        expect(parseConnectionUri(formatConnectionUri(c))).toEqual(c);
      }),
      { numRuns: 2000 },
    );
  });

  it('for any connection the formatter accepts, parsing gives normalizeConnection(c)', () => {
    const loose = fc.record({
      conn_type: fc.oneof(
        connType,
        fc.stringMatching(/^[A-Za-z][A-Za-z0-9_+.-]{0,12}$/),
        fc.constantFrom('postgresql', 'PostgreSQL', 'my-conn-type', 'Google-Cloud_Platform'),
      ),
      host: fc.option(fc.oneof(text, fc.constant('')), { nil: null }),
      login: fc.option(fc.oneof(text, fc.constant('')), { nil: null }),
      password: fc.option(fc.oneof(text, fc.constant('')), { nil: null }),
      schema: fc.option(fc.oneof(text, fc.constant('')), { nil: null }),
      port: fc.option(fc.integer({ min: 0, max: 65535 }), { nil: null }),
      extra,
    });
    fc.assert(
      fc.property(loose, (c) => {
        expect(parseConnectionUri(formatConnectionUri(c))).toEqual(normalizeConnection(c));
      }),
      { numRuns: 1000 },
    );
  });

  it("a host with its own protocol: written type://protocol://host, read back with the protocol lower-cased (urlsplit's scheme)", () => {
    const c = {
      conn_type: 'postgres',
      host: 'Z://%',
      login: null,
      password: null,
      schema: null,
      port: null,
      extra: null,
    };
    const uri = formatConnectionUri(c);
    expect(uri).toBe('postgres://Z://%25');
    expect(parseConnectionUri(uri)).toMatchObject({ host: 'z://%', schema: '' });
  });

  it('the URI is plain ASCII with no raw delimiter inside a part', () => {
    fc.assert(
      fc.property(connection, (c) => {
        const uri = formatConnectionUri(c);
        expect(uri).toMatch(/^[\x21-\x7e]+$/);
        expect(uri).not.toContain('#');
        // A host that carries its own protocol is written as Airflow's get_uri writes it,
        // type://protocol://host; any other '://' is percent-encoded inside its part.
        const parts = uri.split('://');
        if (parts.length === 3) {
          expect(c.host ?? '').toContain('://');
          expect(parts[1]).toMatch(/^[A-Za-z][A-Za-z0-9+.-]*$/);
        } else {
          expect(parts.length).toBe(2);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('for any URI that parses, parse ∘ format ∘ parse = normalizeConnection ∘ parse, then stable', () => {
    const pieces = fc.array(
      fc.constantFrom(
        'postgres://',
        'google-cloud-platform://',
        'http://https://',
        'u',
        ':',
        '@',
        '/',
        '?',
        '&',
        '=',
        '+',
        '%41',
        '%2F',
        '%',
        '[::1]',
        '5432',
        'h',
        '__extra__=%7B%7D',
        '__extra__=%7B%22a%22%3A1%7D',
        'é',
      ),
      { maxLength: 12 },
    );
    fc.assert(
      fc.property(pieces, (ps) => {
        const uri = ps.join('');
        let c: Connection;
        try {
          c = parseConnectionUri(uri);
        } catch (e) {
          expect(isLeoflowError(e) && e.code === 'LF_CONN_URI_INVALID').toBe(true);
          return;
        }
        // As in Airflow, a parsed connection need not be in its written-and-read-back form
        // (`x://%41` has host "A", which get_uri writes as "A" and urlsplit reads as "a"), but
        // one round trip gives normalizeConnection(c), and from there it is stable.
        const back = parseConnectionUri(formatConnectionUri(c));
        expect(back).toEqual(normalizeConnection(c));
        expect(parseConnectionUri(formatConnectionUri(back))).toEqual(back);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('parse errors never echo the input (property)', () => {
  const SECRET = 'Tr0ub4dor&3-hunter2';
  it('a secret planted anywhere in a malformed URI is absent from the error', () => {
    const fragment = fc.constantFrom(
      'postgres://',
      'postgres:',
      'host:5432',
      ':',
      '@',
      '/',
      '?',
      '#',
      '%',
      '%zz',
      '%C3',
      ':abc',
      '[',
      ']',
      '://',
      '\t',
      ' ',
      '__extra__=',
      '%7B',
      SECRET,
      encodeURIComponent(SECRET),
    );
    fc.assert(
      fc.property(fc.array(fragment, { maxLength: 10 }), fc.nat(10), (frags, at) => {
        frags.splice(Math.min(at, frags.length), 0, SECRET);
        const uri = frags.join('');
        try {
          parseConnectionUri(uri);
        } catch (e) {
          expect(isLeoflowError(e)).toBe(true);
          if (!isLeoflowError(e)) return;
          expect(e.code).toBe('LF_CONN_URI_INVALID');
          for (const needle of [SECRET, 'hunter2', 'Tr0ub4dor', uri.trim()]) {
            expect(e.message).not.toContain(needle);
            expect(JSON.stringify(e.details)).not.toContain(needle);
          }
        }
      }),
      { numRuns: 2000 },
    );
  });
});
