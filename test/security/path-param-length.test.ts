import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CATALOGUE } from '@leoflow/core';
import {
  createApiHarness,
  type ApiHarness,
} from '../../packages/server/test/support/api-harness.js';

/**
 * Issue 33 (small item): a Variable key over 100 characters got Fastify's own
 * `414 FST_ERR_MAX_PARAM_LENGTH` although the documented key pattern allows 250. Keys up to the
 * pattern's length work, and every refusal of the router itself carries an LF_ code.
 */
let h: ApiHarness;
let token = '';

beforeAll(async () => {
  h = await createApiHarness('sqlite');
  token = await h.tokenFor('params', 'admin');
});
afterAll(() => h?.close());

describe('path parameters up to the documented 250 characters', () => {
  it('a 250-character Variable key is set, read and deleted', async () => {
    const key = `k${'x'.repeat(249)}`;
    const put = await h.request(token, 'PUT', `/api/v1/variables/${key}`, { value: 'v' });
    expect(put.status, put.text).toBe(200);
    const got = await h.request(token, 'GET', `/api/v1/variables/${key}`);
    expect(got.status, got.text).toBe(200);
    expect(got.json['key']).toBe(key);
    expect((await h.request(token, 'DELETE', `/api/v1/variables/${key}`)).status).toBeLessThan(300);
  });

  it('a 251-character key is refused by the pattern, with an LF_ code', async () => {
    const r = await h.request(token, 'PUT', `/api/v1/variables/${'y'.repeat(251)}`, { value: 'v' });
    expect(r.status).toBe(400);
    expect(r.json['code']).toBe('LF_BAD_REQUEST');
  });

  it("the router's own refusals (a huge segment, a broken escape) answer with LF_ codes", async () => {
    const long = await h.request(token, 'GET', `/api/v1/variables/${'z'.repeat(5000)}`);
    expect(long.status).toBe(414);
    expect(long.json['code']).toBe('LF_PATH_PARAM_TOO_LONG');
    expect(Object.keys(ERROR_CATALOGUE)).toContain(long.json['code']);
    const bad = await h.request(token, 'GET', '/api/v1/variables/%E0%A4%A');
    expect(bad.status).toBe(400);
    expect(String(bad.json['code'])).toMatch(/^LF_/);
  });
});
