import { Buffer } from 'node:buffer';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { maskVariants, SecretMasker, secretValues } from '../../src/credentials/secret-masker.js';

/**
 * Issue 34: every delivered value of 5+ characters and its common encodings become `***` in log
 * lines and XCom values; nothing else changes. Canary values, written out so a broken encoding
 * list turns a case red.
 */
const PW = 'pa55:w/rd+"x"';
const TOKEN = 'tok-3f9a1c77';

const delivered = {
  variables: { api_token: TOKEN, short: 'abcd', region: 'eu-west-1' },
  connections: {
    warehouse: `postgres://etl_login:${encodeURIComponent(PW)}@db.internal:5432/wh?sslmode=require&private_key_pass=kp-4471x&application_name=leoflow-app&region_name=eu-central-1`,
  },
};

describe('what is masked: the delivered values', () => {
  it('Variables, and each Connection’s URI, password, login and every extra not on the non-secret list', () => {
    const values = secretValues(delivered);
    expect(values).toEqual(
      expect.arrayContaining([TOKEN, 'eu-west-1', PW, 'etl_login', 'kp-4471x']),
    );
    expect(values).toContain(delivered.connections.warehouse);
    // shorter than 5 characters: never masked (every "abcd" in a log would go)
    expect(values).not.toContain('abcd');
    // sslmode and region_name are on the non-secret list (docs/connections.md#masking);
    // application_name is not, so it is masked like any extra
    expect(values).not.toContain('require');
    expect(values).not.toContain('eu-central-1');
    expect(values).toContain('leoflow-app');
  });

  it('a multi-line value (a PEM key) is masked line by line as well', () => {
    const pem = '-----BEGIN KEY-----\nMIIBOgIBAAJBAKj34GkxFhD9\n-----END KEY-----';
    const m = SecretMasker.forDelivery({ variables: { k: pem } });
    expect(m.mask('line: MIIBOgIBAAJBAKj34GkxFhD9')).toBe('line: ***');
  });
});

describe('how it is masked', () => {
  const m = SecretMasker.forDelivery(delivered);
  const b = (s: string) => Buffer.from(s);

  it.each([
    ['raw', `token=${TOKEN}`, 'token=***'],
    ['JSON-escaped', `{"pw": ${JSON.stringify(PW)}}`, '{"pw": "***"}'],
    ['URL-encoded', `u=${encodeURIComponent(PW)}&x=1`, 'u=***&x=1'],
    [
      'form-encoded (+ for space)',
      'q=' + encodeURIComponent('a b c d e').replace(/%20/g, '+'),
      'q=a+b+c+d+e',
    ],
    ['base64', `b64 ${b(TOKEN).toString('base64')}`, 'b64 ***'],
    ['base64url', `u ${b(PW).toString('base64url')}`, 'u ***'],
    ['hex', `hex ${b(TOKEN).toString('hex')}`, 'hex ***'],
    ['HEX', `hex ${b(TOKEN).toString('hex').toUpperCase()}`, 'hex ***'],
  ])('%s', (_what, line, expected) => {
    expect(m.mask(line)).toBe(expected);
  });

  it('base64 inside a longer payload (a Basic header), at each alignment', () => {
    for (const prefix of ['u:', 'us:', 'use:']) {
      const header = `Authorization: Basic ${b(prefix + TOKEN).toString('base64')}`;
      const out = m.mask(header);
      expect(out, prefix).toContain('***');
      // nothing of the token's own encoding survives
      expect(out).not.toContain(b(TOKEN).toString('base64').slice(4, 12));
    }
  });

  it('overlapping and adjacent occurrences become one mask; the count says how many were masked', () => {
    const counting = SecretMasker.forValues(['abcdef', 'cdefgh']);
    expect(counting.mask('xx abcdefgh yy abcdef')).toBe('xx *** yy ***');
    expect(counting.masked).toBe(2);
    expect(counting.mask('nothing here')).toBe('nothing here');
    expect(counting.masked).toBe(2);
  });

  it('leaves text without a delivered value untouched (property), and masks any embedded one', () => {
    const text = fc.string({ maxLength: 80 }).filter((s) => !s.includes('tok-'));
    fc.assert(
      fc.property(text, text, (a, z) => {
        expect(m.mask(a + z)).toBe(a + z);
        expect(m.mask(a + TOKEN + z)).not.toContain(TOKEN);
      }),
    );
  });

  it('an empty delivery masks nothing and looks for nothing', () => {
    const none = SecretMasker.forDelivery({});
    expect(none.patterns).toBe(0);
    expect(none.mask(TOKEN)).toBe(TOKEN);
  });

  it('variants: each encoding at least 5 characters, no duplicates', () => {
    const v = maskVariants('hello world');
    expect(new Set(v).size).toBe(v.length);
    expect(v).toEqual(
      expect.arrayContaining([
        'hello world',
        'hello%20world',
        'hello+world',
        Buffer.from('hello world').toString('base64').replace(/=+$/, ''),
        Buffer.from('hello world').toString('hex'),
      ]),
    );
  });
});
