import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NON_SECRET_EXTRA_FIELDS } from '@leoflow/core';
import {
  createApiHarness,
  type ApiHarness,
} from '../../packages/server/test/support/api-harness.js';

/**
 * Issue 10 item 6: a Connection's extra is masked default-deny for everyone reading it through
 * the ordinary routes (viewer, developer — no reveal): a value shows only when its field is on
 * NON_SECRET_EXTRA_FIELDS, so a secret under a name no list foresaw never shows.
 */

/** The documented list (docs/connections.md); the two-sided test checks the code has the same. */
const DOCUMENTED = [
  'charset',
  'connect_timeout',
  'location',
  'num_retries',
  'project',
  'project_id',
  'region',
  'region_name',
  'scope',
  'sslmode',
  'timeout',
  'use_ssl',
  'verify',
];
const documented = (k: string) =>
  DOCUMENTED.includes(
    k
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}_]+/gu, '_'),
  );

const TENANT = 'masking';
let h: ApiHarness;
let admin: string;
let readers: { role: string; token: string }[];

beforeAll(async () => {
  h = await createApiHarness('sqlite');
  admin = await h.tokenFor(TENANT, 'admin');
  readers = [
    { role: 'viewer', token: await h.tokenFor(TENANT, 'viewer') },
    { role: 'developer', token: await h.tokenFor(TENANT, 'developer') },
  ];
});

afterAll(async () => {
  await h?.close();
});

const canary = () => `canary-${randomBytes(8).toString('hex')}`;

async function putExtra(id: string, extra: Record<string, unknown>): Promise<void> {
  const r = await h.request(admin, 'PUT', `/api/v1/connections/${id}`, {
    connection: { conn_type: 'generic', host: 'h.example', extra },
  });
  expect(r.status, r.text).toBe(200);
}

/** Every reply a reader without reveal can get that carries the connection's extra. */
async function readerReplies(id: string): Promise<string[]> {
  const out: string[] = [];
  for (const { token } of readers) {
    const one = await h.request(token, 'GET', `/api/v1/connections/${id}`);
    expect(one.status, one.text).toBe(200);
    out.push(one.text);
    const list = await h.request(token, 'GET', '/api/v1/connections?limit=1000');
    expect(list.status, list.text).toBe(200);
    out.push(list.text);
  }
  return out;
}

describe('connection extras are masked default-deny for readers without reveal', () => {
  const NAMED = [
    'pwd',
    'jwt',
    'credentials',
    'auth',
    'session_key',
    'key_json',
    'role_arn',
    'PWD',
    'Session-Key',
    'aws_session_token_v2',
    'client_cert',
    'sas',
  ];

  it(`hides the value of ${NAMED.join(', ')} from viewer and developer`, async () => {
    const extra: Record<string, string> = {};
    const secrets: string[] = [];
    for (const k of NAMED) {
      const v = canary();
      extra[k] = v;
      secrets.push(v);
    }
    await putExtra('named_keys', extra);
    for (const text of await readerReplies('named_keys')) {
      for (const v of secrets) expect(text).not.toContain(v);
    }
  });

  it('hides the value of every generated key name not on the non-secret list', async () => {
    const keyName = fc
      .oneof(
        fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_.-]{0,24}$/),
        fc.string({ minLength: 1, maxLength: 24 }),
      )
      .filter((k) => !documented(k) && k !== '__proto__' && k !== 'constructor');
    const value = fc.oneof(
      fc.constant('s'),
      fc.constant('n'),
      fc.constant('obj'),
      fc.constant('list'),
    );
    let i = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(fc.tuple(keyName, value), {
          minLength: 1,
          maxLength: 8,
          selector: (t) => t[0],
        }),
        async (entries) => {
          const id = `gen_${i++}`;
          const extra: Record<string, unknown> = {};
          const secrets: string[] = [];
          for (const [k, kind] of entries) {
            const v = canary();
            secrets.push(v);
            if (kind === 's') extra[k] = v;
            else if (kind === 'n') {
              const n = 7_000_000_000 + Math.floor(Math.random() * 1e9);
              secrets.push(String(n));
              extra[k] = n;
            } else if (kind === 'obj') extra[k] = { inner: v, region: v };
            else extra[k] = [v, { password: v }];
          }
          await putExtra(id, extra);
          for (const text of await readerReplies(id)) {
            for (const v of secrets) expect(text).not.toContain(v);
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it('hides a secret nested under a field that is on the non-secret list', async () => {
    const v = canary();
    await putExtra('nested', { project: { password: v, id: v }, region_name: [v] });
    for (const text of await readerReplies('nested')) expect(text).not.toContain(v);
  });

  it('shows the scalar values of the documented non-secret fields (two-sided)', async () => {
    expect([...NON_SECRET_EXTRA_FIELDS]).toEqual(DOCUMENTED);
    const extra = Object.fromEntries(DOCUMENTED.map((k) => [k, `shown-${k}`]));
    await putExtra('shown', { ...extra, pwd: 'hidden-value-1' });
    const viewer = readers[0]!.token;
    const r = await h.request(viewer, 'GET', '/api/v1/connections/shown');
    const got = r.json['extra'] as Record<string, unknown>;
    for (const k of DOCUMENTED) expect(got[k]).toBe(`shown-${k}`);
    expect(got['pwd']).toBe('***');
  });

  it('an extra parsed from a URI query is masked the same way', async () => {
    const v = canary();
    const r = await h.request(admin, 'PUT', '/api/v1/connections/from_uri', {
      uri: `postgres://u@db.example:5432/x?sslmode=require&jwt=${v}&role_arn=${v}`,
    });
    expect(r.status, r.text).toBe(200);
    expect(r.text).not.toContain(v);
    for (const text of await readerReplies('from_uri')) expect(text).not.toContain(v);
  });

  it('the audited reveal route (connections:reveal) still returns every value', async () => {
    const v = canary();
    await putExtra('revealed', { pwd: v });
    const denied = await h.request(
      readers[0]!.token,
      'POST',
      '/api/v1/connections/revealed/reveal',
    );
    expect(denied.status).toBe(403);
    const r = await h.request(admin, 'POST', '/api/v1/connections/revealed/reveal');
    expect(r.status).toBe(200);
    expect(r.text).toContain(v);
  });
});
