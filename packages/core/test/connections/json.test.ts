import { describe, expect, it } from 'vitest';
import { isLeoflowError, parseConnectionJson } from '@leoflow/core';

function safeError(text: string): string {
  try {
    parseConnectionJson(text);
  } catch (e) {
    expect(isLeoflowError(e)).toBe(true);
    if (!isLeoflowError(e)) return '';
    expect(e.code).toBe('LF_CONN_JSON_INVALID');
    expect(e.message).not.toContain('hunter2');
    expect(JSON.stringify(e.details)).not.toContain('hunter2');
    return e.message;
  }
  throw new Error('expected an error');
}

describe('parseConnectionJson', () => {
  it("reads Airflow's documented JSON form", () => {
    expect(
      parseConnectionJson(
        JSON.stringify({
          conn_type: 'my-conn-type',
          login: 'my-login',
          password: 'my-password',
          host: 'my-host',
          port: 1234,
          schema: 'my-schema',
          extra: { param1: 'val1', param2: 'val2' },
        }),
      ),
    ).toEqual({
      conn_type: 'my_conn_type',
      host: 'my-host',
      login: 'my-login',
      password: 'my-password',
      schema: 'my-schema',
      port: 1234,
      extra: { param1: 'val1', param2: 'val2' },
    });
  });

  it('extra may be a JSON string of an object', () => {
    expect(parseConnectionJson('{"conn_type":"http","extra":"{\\"a\\": 1}"}').extra).toEqual({
      a: 1,
    });
  });

  it('absent and null fields are None; "" stays "" (as Connection.from_json keeps it)', () => {
    expect(
      parseConnectionJson('{"conn_type":"postgresql","host":"","login":"","schema":"","extra":""}'),
    ).toEqual({
      conn_type: 'postgres',
      host: '',
      login: '',
      password: null,
      schema: '',
      port: null,
      extra: null,
    });
    expect(parseConnectionJson('{"conn_type":"x","login":null}')).toEqual({
      conn_type: 'x',
      host: null,
      login: null,
      password: null,
      schema: null,
      port: null,
      extra: null,
    });
  });

  it('a password "" is None (test_from_json_special_characters: the setter ignores it)', () => {
    expect(parseConnectionJson('{"password": ""}').password).toBeNull();
    expect(parseConnectionJson('{"password": "pass :/!@#$%^&*(){}\\""}').password).toBe(
      'pass :/!@#$%^&*(){}"',
    );
  });

  it('test_from_json_extra: null, an object, or a JSON string of one', () => {
    expect(parseConnectionJson('{"extra": null}').extra).toBeNull();
    expect(parseConnectionJson('{"extra": {"yo": "hi"}}').extra).toEqual({ yo: 'hi' });
    expect(parseConnectionJson('{"extra": "{\\"yo\\": \\"hi\\"}"}').extra).toEqual({ yo: 'hi' });
  });

  it('an empty extra object is no extra (from_json: `if extra:`); the string "{}" is kept', () => {
    expect(parseConnectionJson('{"conn_type":"x","extra":{}}').extra).toBeNull();
    expect(parseConnectionJson('{"conn_type":"x","extra":"{}"}').extra).toEqual({});
  });

  it.each([
    ['{"conn_type": "abc-abc"}', 'abc_abc'],
    ['{"conn_type": "abc_abc"}', 'abc_abc'],
    ['{"conn_type": "postgresql"}', 'postgres'],
  ])('test_from_json_conn_type: %s → %s', (text, type) => {
    expect(parseConnectionJson(text).conn_type).toBe(type);
  });

  it.each([
    // from_json's `if port:` — the number 0 is falsy (no port), the string "0" is port 0
    // (Airflow 3.3.2, checked by the differential oracle).
    ['{"port": 0}', null],
    ['{"port": 1}', 1],
    ['{"port": "1"}', 1],
    ['{"port": "0"}', 0],
    ['{"port": ""}', null],
    ['{"port": null}', null],
  ])('test_from_json_port: %s → %j', (text, port) => {
    expect(parseConnectionJson(text).port).toBe(port);
  });

  // Airflow refuses only "1.5" (int() of it raises); it takes -1 and 65536 as they are and 1.5
  // as 1. Leoflow refuses all four (docs/connections.md, "Where Leoflow is stricter").
  it.each(['{"port": -1}', '{"port": 65536}', '{"port": 1.5}', '{"port": "1.5"}'])(
    'refuses a port that is not an integer in 0-65535: %s',
    (text) => {
      expect(safeError(text)).toMatch(/port/);
    },
  );

  it('no conn_type: accepted with the type unset and every missing field None, with a warning', () => {
    const warnings: string[] = [];
    for (const text of [
      '{"host": "h", "password": "hunter2"}',
      '{"conn_type": "", "host": "h"}',
      '{"conn_type": null}',
      '{}',
    ]) {
      const c = parseConnectionJson(text, { warn: (m) => warnings.push(m) });
      expect(c.conn_type).toBeNull();
      expect(c.port).toBeNull();
      expect(c.extra).toBeNull();
    }
    expect(warnings).toHaveLength(4);
    expect(warnings[0]).toMatch(/no conn_type/);
    expect(warnings.join()).not.toContain('hunter2');
    expect(
      parseConnectionJson('{"conn_type": "x"}', { warn: () => warnings.push('x') }),
    ).toBeTruthy();
    expect(warnings).toHaveLength(4);
  });

  it('port may be a digit string, as Airflow coerces it', () => {
    expect(parseConnectionJson('{"conn_type":"x","port":"5432"}').port).toBe(5432);
    expect(parseConnectionJson('{"conn_type":"x","port":""}').port).toBeNull();
  });

  it('description is accepted (and not part of Connection)', () => {
    expect(parseConnectionJson('{"conn_type":"x","description":"d"}')).not.toHaveProperty(
      'description',
    );
  });

  it.each([
    [
      'conn_type not a string',
      '{"conn_type":1,"password":"hunter2"}',
      /conn_type must be a string/,
    ],
    ['not JSON', '{"conn_type":"x","password":hunter2}', /not valid JSON \(line 1 column/],
    ['not an object', '["hunter2"]', /not an object/],
    [
      'port with a fraction',
      '{"conn_type":"x","port":5432.5,"password":"hunter2"}',
      /port must be an integer/,
    ],
    ['port out of range', '{"conn_type":"x","port":70000,"password":"hunter2"}', /out of range/],
    ['port not numeric', '{"conn_type":"x","port":"hunter2"}', /port must be an integer/],
    ['port boolean', '{"conn_type":"x","port":true}', /port must be an integer/],
    [
      'password not a string',
      '{"conn_type":"x","password":["hunter2"]}',
      /password must be a string/,
    ],
    [
      'extra not JSON',
      '{"conn_type":"x","extra":"{hunter2"}',
      /extra is a string but not valid JSON/,
    ],
    [
      'extra a JSON list',
      '{"conn_type":"x","extra":"[\\"hunter2\\"]"}',
      /extra must be a JSON object/,
    ],
    ['extra a number', '{"conn_type":"x","extra":42}', /extra must be an object/],
    ['extra with NaN', '{"conn_type":"x","extra":{"a":NaN}}', /NaN or Infinity/],
    ['unknown field, not named', '{"conn_type":"x","hunter2":"y"}', /a field that is not one of/],
    ['empty', '', /empty/],
  ])('%s → LF_CONN_JSON_INVALID', (_, text, pattern) => {
    expect(safeError(text)).toMatch(pattern);
  });

  it('the message quotes no part of the input, even where V8 would', () => {
    const msg = safeError('{"conn_type":"x","password":"hunter2"');
    expect(msg).toMatch(/line 1 column \d+/);
  });
});
