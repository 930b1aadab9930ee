import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { googleAuth, resolveGoogleConnection, SECRET_MANAGER_ENDPOINT_ENV } from '../src/index.js';
import {
  gcpUri,
  json,
  makeServiceAccountKey,
  startFake,
  startFakeMetadata,
  startFakeTokenEndpoint,
  verifiedAssertion,
  type Fake,
  type TestKey,
} from './support/fakes.js';

// google-auth-library reads ADC settings from process.env; this file owns its process (pool: forks).
let metadata: Fake;
let tokens: Fake;
let secrets: Fake;
let keyA: TestKey; // keyfile_dict / secret key
let keyB: TestKey; // key_path key
let keyBPath: string;
const secretPayloads = new Map<string, string>();

beforeAll(async () => {
  metadata = await startFakeMetadata('adc-project');
  tokens = await startFakeTokenEndpoint();
  secrets = await startFake((req, _body, res) => {
    const m = /^\/v1\/(.+):access$/.exec(req.url ?? '');
    const data = m?.[1] === undefined ? undefined : secretPayloads.get(m[1]);
    if (req.headers.authorization !== 'Bearer meta-token')
      return json(res, 401, { error: 'no ADC token' });
    if (data === undefined) return json(res, 404, { error: { code: 404 } });
    json(res, 200, { name: m![1], payload: { data: Buffer.from(data).toString('base64') } });
  });
  const home = mkdtempSync(join(tmpdir(), 'leoflow-sdk-home-'));
  process.env.HOME = home; // no gcloud well-known ADC file
  delete process.env.GOOGLE_APPLICATION_CREDENTIALS;
  delete process.env.GOOGLE_CLOUD_PROJECT;
  delete process.env.GCLOUD_PROJECT;
  delete process.env.METADATA_SERVER_DETECTION;
  process.env.GCE_METADATA_HOST = metadata.url.replace('http://', '');
  keyA = makeServiceAccountKey(
    `${tokens.url}/token`,
    'key-project-a',
    'a@key-project-a.iam.gserviceaccount.com',
  );
  keyB = makeServiceAccountKey(
    `${tokens.url}/token`,
    'key-project-b',
    'b@key-project-b.iam.gserviceaccount.com',
  );
  keyBPath = join(home, 'key.json');
  writeFileSync(keyBPath, JSON.stringify(keyB.keyJson), { mode: 0o600 });
  secretPayloads.set('projects/p/secrets/sa-key/versions/latest', JSON.stringify(keyA.keyJson));
  secretPayloads.set(
    'projects/adc-project/secrets/bare-key/versions/latest',
    JSON.stringify(keyA.keyJson),
  );
});

afterAll(async () => {
  await Promise.all([metadata.close(), tokens.close(), secrets.close()]);
});

beforeEach(() => {
  tokens.requests.length = 0;
  secrets.requests.length = 0;
  metadata.requests.length = 0;
});

const env = (extra: Record<string, unknown>, more: Record<string, string> = {}) => ({
  AIRFLOW_CONN_GCP: gcpUri(extra),
  [SECRET_MANAGER_ENDPOINT_ENV]: secrets.url,
  ...more,
});

/** Gets a token through the returned client and returns what the token endpoint received. */
async function tokenRequestOf(extra: Record<string, unknown>) {
  const auth = await googleAuth('gcp', { env: env(extra) });
  const token = await auth.getAccessToken();
  expect(tokens.requests).toHaveLength(1);
  return { token, body: tokens.requests[0]!.body, auth };
}

describe('T96 resolution order: keyfile_dict → key_path → key_secret_name → ADC', () => {
  it('keyfile_dict wins over key_path, and the client signs with exactly that key', async () => {
    const { token, body } = await tokenRequestOf({
      keyfile_dict: keyA.keyJson,
      key_path: keyBPath,
    });
    expect(token).toBe('sa-token');
    const { payload, header } = verifiedAssertion(body, keyA.publicKey);
    expect(header['alg']).toBe('RS256');
    expect(payload['iss']).toBe('a@key-project-a.iam.gserviceaccount.com');
    expect(() => verifiedAssertion(body, keyB.publicKey)).toThrow(/does not verify/);
  });

  it('keyfile_dict as a JSON string is the same key', async () => {
    const { body } = await tokenRequestOf({ keyfile_dict: JSON.stringify(keyA.keyJson) });
    expect(verifiedAssertion(body, keyA.publicKey).payload['iss']).toBe(
      keyA.keyJson['client_email'],
    );
  });

  it('key_path only: the key file is read in the task and signs the assertion', async () => {
    const { body } = await tokenRequestOf({ key_path: keyBPath });
    expect(verifiedAssertion(body, keyB.publicKey).payload['iss']).toBe(
      keyB.keyJson['client_email'],
    );
    expect(metadata.requests).toHaveLength(0);
  });

  it('key_path that cannot be read: an error naming the path and the mount', async () => {
    await expect(
      googleAuth('gcp', { env: env({ key_path: '/nonexistent/key.json' }) }),
    ).rejects.toThrow(/key_path \/nonexistent\/key.json cannot be read.*mounted/);
  });

  it('key_secret_name only: fetched from Secret Manager versions/latest with ADC, then used to sign', async () => {
    const r = await resolveGoogleConnection('gcp', {
      env: env({ key_secret_name: 'projects/p/secrets/sa-key' }),
    });
    expect(r.source).toBe('key_secret_name');
    expect(secrets.requests).toHaveLength(1);
    expect(secrets.requests[0]!.url).toBe('/v1/projects/p/secrets/sa-key/versions/latest:access');
    expect(secrets.requests[0]!.headers.authorization).toBe('Bearer meta-token');
    const { body } = await tokenRequestOf({ key_secret_name: 'projects/p/secrets/sa-key' });
    expect(verifiedAssertion(body, keyA.publicKey).payload['iss']).toBe(
      keyA.keyJson['client_email'],
    );
  });

  it('key_secret_name: the Secret Manager endpoint option beats the env; a missing secret is a clear error', async () => {
    const e = env(
      { key_secret_name: 'projects/p/secrets/absent' },
      { [SECRET_MANAGER_ENDPOINT_ENV]: 'http://127.0.0.1:1' },
    );
    await expect(
      resolveGoogleConnection('gcp', { env: e, secretManagerEndpoint: secrets.url }),
    ).rejects.toThrow(/Secret Manager \(HTTP 404\).*secretAccessor/);
    expect(secrets.requests[0]!.url).toBe('/v1/projects/p/secrets/absent/versions/latest:access');
  });

  it('nothing set: Application Default Credentials (the metadata server), no key anywhere', async () => {
    const auth = await googleAuth('gcp', { env: env({}) });
    expect(await auth.getAccessToken()).toBe('meta-token');
    expect(tokens.requests).toHaveLength(0);
    const tokenReq = metadata.requests.find((r) =>
      r.url.includes('/service-accounts/default/token'),
    );
    expect(tokenReq?.url).toContain(
      encodeURIComponent('https://www.googleapis.com/auth/cloud-platform'),
    );
    expect(await auth.getProjectId()).toBe('adc-project');
  });
});

describe('T97 legacy extra__google_cloud_platform__ names are a fallback only', () => {
  it('legacy key_path is used when key_path is absent', async () => {
    const r = await resolveGoogleConnection('gcp', {
      env: env({ extra__google_cloud_platform__key_path: keyBPath }),
    });
    expect(r.source).toBe('key_path');
    expect(r.credentials?.client_email).toBe(keyB.keyJson['client_email']);
  });
  it('a short field present but "" or null reads as unset: its legacy twin is NOT used', async () => {
    for (const cleared of ['', null]) {
      const r = await resolveGoogleConnection('gcp', {
        env: env({
          key_path: cleared,
          extra__google_cloud_platform__key_path: keyBPath,
          project: cleared,
          extra__google_cloud_platform__project: 'stale-project',
        }),
      });
      expect([r.source, r.credentials, r.projectId]).toEqual(['adc', null, null]);
    }
  });
  it('both set and non-empty: the short name wins', async () => {
    const other = join(process.env.HOME!, 'other.json');
    writeFileSync(other, JSON.stringify(keyA.keyJson));
    const r = await resolveGoogleConnection('gcp', {
      env: env({ key_path: other, extra__google_cloud_platform__key_path: keyBPath }),
    });
    expect(r.credentials?.client_email).toBe(keyA.keyJson['client_email']);
  });
  it('legacy keyfile_dict, project and scope names are honoured too', async () => {
    const r = await resolveGoogleConnection('gcp', {
      env: env({
        extra__google_cloud_platform__keyfile_dict: JSON.stringify(keyA.keyJson),
        extra__google_cloud_platform__project: 'legacy-project',
        extra__google_cloud_platform__scope: 'https://x.example/a',
      }),
    });
    expect([r.source, r.projectId, r.scopes]).toEqual([
      'keyfile_dict',
      'legacy-project',
      ['https://x.example/a'],
    ]);
  });
});

describe('T98 scopes, project and num_retries', () => {
  it('scopes as a comma string: trimmed, empties dropped, and exactly those are requested', async () => {
    const { body } = await tokenRequestOf({
      keyfile_dict: keyA.keyJson,
      scopes: ' https://x.example/a, https://x.example/b,,https://x.example/c ',
    });
    expect(verifiedAssertion(body, keyA.publicKey).payload['scope']).toBe(
      'https://x.example/a https://x.example/b https://x.example/c',
    );
  });
  it('scopes as a list', async () => {
    const { body } = await tokenRequestOf({
      keyfile_dict: keyA.keyJson,
      scopes: ['https://x.example/a', 'https://x.example/b'],
    });
    expect(verifiedAssertion(body, keyA.publicKey).payload['scope']).toBe(
      'https://x.example/a https://x.example/b',
    );
  });
  it('the scope alias is honoured', async () => {
    const { body } = await tokenRequestOf({
      keyfile_dict: keyA.keyJson,
      scope: 'https://x.example/only',
    });
    expect(verifiedAssertion(body, keyA.publicKey).payload['scope']).toBe('https://x.example/only');
  });
  it('no scopes: cloud-platform', async () => {
    const { body } = await tokenRequestOf({ keyfile_dict: keyA.keyJson });
    expect(verifiedAssertion(body, keyA.publicKey).payload['scope']).toBe(
      'https://www.googleapis.com/auth/cloud-platform',
    );
  });
  it('project absent: the key file project_id', async () => {
    const auth = await googleAuth('gcp', { env: env({ keyfile_dict: keyA.keyJson }) });
    expect(await auth.getProjectId()).toBe('key-project-a');
  });
  it('project / project_id beat the key project', async () => {
    for (const name of ['project', 'project_id']) {
      const auth = await googleAuth('gcp', {
        env: env({ keyfile_dict: keyA.keyJson, [name]: 'explicit' }),
      });
      expect(await auth.getProjectId()).toBe('explicit');
    }
  });
  it('project absent and keyless: the ADC project', async () => {
    const r = await resolveGoogleConnection('gcp', { env: env({}) });
    expect(r.projectId).toBeNull();
    expect(await (await googleAuth('gcp', { env: env({}) })).getProjectId()).toBe('adc-project');
  });
  it('num_retries configures the client transport (string form too)', async () => {
    for (const v of [3, '3']) {
      const auth = await googleAuth('gcp', {
        env: env({ keyfile_dict: keyA.keyJson, num_retries: v }),
      });
      const client = await auth.getClient();
      expect(client.transporter.defaults.retryConfig?.retry).toBe(3);
      expect(client.transporter.defaults.retry).toBe(true);
    }
    expect(
      (await resolveGoogleConnection('gcp', { env: env({ num_retries: 2 }) })).numRetries,
    ).toBe(2);
  });
});

describe('keys as the Google provider reads them', () => {
  it('a keyfile_dict whose private_key carries literal "\\n" pairs signs with that key', async () => {
    const flat = {
      ...keyA.keyJson,
      private_key: keyA.keyJson['private_key']!.replace(/\n/g, '\\n'),
    };
    expect(flat.private_key).not.toContain('\n');
    const { body } = await tokenRequestOf({ keyfile_dict: JSON.stringify(flat) });
    expect(verifiedAssertion(body, keyA.publicKey).payload['iss']).toBe(
      keyA.keyJson['client_email'],
    );
  });

  it('a private_key that still cannot be read fails naming the field, not with an OpenSSL error', async () => {
    const broken = {
      ...keyA.keyJson,
      private_key: '-----BEGIN PRIVATE KEY-----\nMIIEvQ-not-a-key\n-----END PRIVATE KEY-----\n',
    };
    let err: unknown;
    try {
      await googleAuth('gcp', { env: env({ keyfile_dict: broken }) });
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: 'LF_SDK_GCP_KEY_INVALID' });
    const message = (err as Error).message;
    expect(message).toMatch(/^keyfile_dict: private_key cannot be read as a PEM private key/);
    expect(message).not.toMatch(/MIIEvQ|error:|DECODER|asn1|OpenSSL/i);
    expect(tokens.requests).toHaveLength(0);
  });

  it('a bare key_secret_name is looked up in the ADC project, as Airflow does', async () => {
    const r = await resolveGoogleConnection('gcp', { env: env({ key_secret_name: 'bare-key' }) });
    expect(r.source).toBe('key_secret_name');
    expect(secrets.requests.map((q) => q.url)).toEqual([
      '/v1/projects/adc-project/secrets/bare-key/versions/latest:access',
    ]);
    expect(r.credentials?.client_email).toBe(keyA.keyJson['client_email']);
  });

  it('a bare key_secret_name with no ADC project is an error that says so', async () => {
    const noProject = await startFakeMetadata(null);
    const saved = process.env.GCE_METADATA_HOST;
    process.env.GCE_METADATA_HOST = noProject.url.replace('http://', '');
    try {
      await expect(
        resolveGoogleConnection('gcp', { env: env({ key_secret_name: 'bare-key' }) }),
      ).rejects.toMatchObject({
        code: 'LF_SDK_GCP_SECRET_PROJECT_MISSING',
        message: expect.stringMatching(
          /ADC has no project.*GOOGLE_CLOUD_PROJECT.*projects\/<project>\/secrets/,
        ),
      });
      expect(secrets.requests).toHaveLength(0);
    } finally {
      process.env.GCE_METADATA_HOST = saved;
      await noProject.close();
    }
  });

  it('num_retries: 5 when missing, null or empty; an explicit 0 stays 0; a non-number names the field', async () => {
    for (const v of [undefined, null, '']) {
      const extra = v === undefined ? {} : { num_retries: v };
      const r = await resolveGoogleConnection('gcp', { env: env(extra) });
      expect(r.numRetries).toBe(5);
      const client = await (
        await googleAuth('gcp', { env: env({ keyfile_dict: keyA.keyJson, ...extra }) })
      ).getClient();
      expect(client.transporter.defaults.retryConfig?.retry).toBe(5);
    }
    const zero = await (
      await googleAuth('gcp', { env: env({ keyfile_dict: keyA.keyJson, num_retries: 0 }) })
    ).getClient();
    expect([zero.transporter.defaults.retry, zero.transporter.defaults.retryConfig?.retry]).toEqual(
      [false, 0],
    );
    await expect(
      resolveGoogleConnection('gcp', { env: env({ num_retries: 'five' }) }),
    ).rejects.toThrow(/num_retries must be a non-negative integer/);
  });
});

describe('googleAuth refuses what it cannot use', () => {
  it('a missing connection says how to declare it', async () => {
    await expect(googleAuth('gcp_missing', { env: {} })).rejects.toThrow(
      /connections: \[gcp_missing\]/,
    );
  });
  it('a connection of another type', async () => {
    await expect(
      googleAuth('gcp', { env: { AIRFLOW_CONN_GCP: 'postgres://u:p@h/db' } }),
    ).rejects.toThrow(/not google_cloud_platform/);
  });
  it('a keyfile_dict that is not a service-account key, without echoing it', async () => {
    const p = googleAuth('gcp', {
      env: env({ keyfile_dict: { type: 'service_account', client_email: 'x@y', private_key: '' } }),
    });
    await expect(p).rejects.toThrow(/no private_key/);
  });
  it('the JSON connection form works too', async () => {
    const e = {
      AIRFLOW_CONN_GCP: JSON.stringify({
        conn_type: 'google_cloud_platform',
        extra: { key_path: keyBPath },
      }),
    };
    expect((await resolveGoogleConnection('gcp', { env: e })).source).toBe('key_path');
  });
});
