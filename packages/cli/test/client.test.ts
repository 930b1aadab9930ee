import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { ApiClient, isLoopback, localAdminTokenDecision } from '../src/client.js';

describe('localAdminTokenDecision: where the local admin.token may go', () => {
  it.each([
    'http://127.0.0.1:8080',
    'http://127.1.2.3',
    'http://localhost:8080/',
    'http://LOCALHOST:1',
    'http://[::1]:8080',
    'http://[0:0:0:0:0:0:0:1]:8080',
    'https://2130706433/', // 127.0.0.1 written as one number
  ])('%s is loopback: the file token is sent', (url) => {
    expect(isLoopback(url)).toBe(true);
    for (const source of ['flag', 'env', 'profile', 'default'] as const) {
      expect(localAdminTokenDecision(url, source, true)).toBe('send');
    }
  });

  it.each([
    'https://leoflow.example.com',
    'http://192.0.2.2:8080',
    'http://10.0.0.1',
    'http://0.0.0.0:8080',
    'http://localhost.example.com',
    'http://127.0.0.1.nip.io',
    'http://127.0.0.1@evil.example', // userinfo, not the host
    'http://[::ffff:127.0.0.1]', // not a loopback literal as written
    'http://[fd00::2]',
    'not a url',
  ])('%s is not loopback: refused when the file exists, withheld otherwise', (url) => {
    expect(isLoopback(url)).toBe(false);
    expect(localAdminTokenDecision(url, 'env', true)).toBe('refuse');
    expect(localAdminTokenDecision(url, 'flag', true)).toBe('refuse');
    expect(localAdminTokenDecision(url, 'env', false)).toBe('withhold');
    // A profile naming another machine goes out without a token; its 401 says how to add one.
    expect(localAdminTokenDecision(url, 'profile', true)).toBe('withhold');
  });
});

describe('ApiClient never sends the local admin.token to a non-loopback URL', () => {
  let dir: string;
  const saved = { url: process.env.LEOFLOW_URL, token: process.env.LEOFLOW_TOKEN };
  const fetchSpy = vi.fn();
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'leoflow-client-'));
    mkdirSync(join(dir, 'data'));
    writeFileSync(join(dir, 'data', 'admin.token'), 'lf_admin_SECRET_TOKEN\n', { mode: 0o600 });
    delete process.env.LEOFLOW_TOKEN;
    vi.stubGlobal('fetch', fetchSpy);
  });
  afterEach(() => {
    fetchSpy.mockReset();
    delete process.env.LEOFLOW_URL;
  });
  afterAll(() => {
    vi.unstubAllGlobals();
    if (saved.url !== undefined) process.env.LEOFLOW_URL = saved.url;
    if (saved.token !== undefined) process.env.LEOFLOW_TOKEN = saved.token;
    rmSync(dir, { recursive: true, force: true });
  });

  it('LEOFLOW_URL elsewhere: refused before any fetch, saying why and how to pass a token', async () => {
    process.env.LEOFLOW_URL = 'https://leoflow.example.com';
    const client = new ApiClient({ dataDir: join(dir, 'data') });
    let err: unknown;
    try {
      await client.request('GET', '/api/v1/dags');
    } catch (e) {
      err = e;
    }
    expect(fetchSpy).not.toHaveBeenCalled();
    expect(err).toMatchObject({ code: 'LF_CLI_TOKEN_WITHHELD', exitCode: 1 });
    const message = (err as Error).message;
    expect(message).toMatch(/not sending the local standalone's admin token/);
    expect(message).toMatch(/from LEOFLOW_URL.*not a loopback address/);
    expect(message).toMatch(/--token <token>, LEOFLOW_TOKEN=<token>, or a profile/);
    expect(message).not.toContain('lf_admin_SECRET_TOKEN');
  });

  it('--url elsewhere: the same', async () => {
    const client = new ApiClient({ url: 'http://192.0.2.2:8080', dataDir: join(dir, 'data') });
    await expect(client.request('GET', '/api/v1/dags')).rejects.toThrow(/from --url/);
    expect(fetchSpy).not.toHaveBeenCalled();
  });

  it('loopback still gets it', async () => {
    fetchSpy.mockResolvedValue(new Response('{"dags":[]}', { status: 200 }));
    const client = new ApiClient({ url: 'http://127.0.0.1:9', dataDir: join(dir, 'data') });
    expect(client.tokenSource).toBe('file');
    await client.request('GET', '/api/v1/dags');
    const init = fetchSpy.mock.calls[0]![1] as { headers: Record<string, string> };
    expect(init.headers.authorization).toBe('Bearer lf_admin_SECRET_TOKEN');
  });

  it('an explicit token goes anywhere, and the file is not consulted', async () => {
    fetchSpy.mockResolvedValue(new Response('{}', { status: 200 }));
    const client = new ApiClient({
      url: 'https://leoflow.example.com',
      token: 'given',
      dataDir: join(dir, 'data'),
    });
    await client.request('GET', '/api/v1/dags');
    const init = fetchSpy.mock.calls[0]![1] as { headers: Record<string, string> };
    expect(init.headers.authorization).toBe('Bearer given');
  });

  it('no admin.token file: a non-loopback request goes out without a token', async () => {
    fetchSpy.mockResolvedValue(new Response('{}', { status: 200 }));
    const client = new ApiClient({
      url: 'https://leoflow.example.com',
      dataDir: join(dir, 'none'),
    });
    await client.request('GET', '/api/v1/dags');
    const init = fetchSpy.mock.calls[0]![1] as { headers: Record<string, string> };
    expect(init.headers.authorization).toBeUndefined();
  });
});
