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

  it('only conn_type is required; absent, null and "" fields are null', () => {
    expect(
      parseConnectionJson('{"conn_type":"postgresql","host":"","login":null,"extra":""}'),
    ).toEqual({
      conn_type: 'postgres',
      host: null,
      login: null,
      password: null,
      schema: null,
      port: null,
      extra: null,
    });
  });

  it('extra {} stays {} (an empty object is not the same as no extra)', () => {
    expect(parseConnectionJson('{"conn_type":"x","extra":{}}').extra).toEqual({});
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
    ['conn_type absent', '{"host":"h","password":"hunter2"}', /conn_type is missing/],
    ['conn_type empty', '{"conn_type":"","password":"hunter2"}', /conn_type is missing/],
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
