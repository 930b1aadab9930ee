import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { scratchDir, startStandalone, type Standalone } from '../support/processes.js';

/**
 * A web app session survives a restart of standalone on the same data directory (the store
 * keeps it), and signing out ends it for good. Real processes, real HTTP, the real SQLite file.
 */
describe('web app sessions across a standalone restart', () => {
  const scratch = scratchDir('leoflow-ui-restart-');
  const dataDir = join(scratch.dir, 'data');
  let sa: Standalone | undefined;
  afterAll(async () => {
    await sa?.stop();
    scratch.cleanup();
  });

  const browserHeaders = (s: Standalone) => ({
    'x-leoflow-csrf': '1',
    origin: new URL(s.url).origin,
  });
  const whoami = (s: Standalone, cookie: string) =>
    fetch(`${s.url}/api/v1/whoami`, { headers: { cookie } });

  it('the cookie still works after a restart; after sign-out it never works again', async () => {
    sa = await startStandalone({ dataDir });
    const first = sa;
    const signIn = await fetch(`${first.url}/api/ui/session`, {
      method: 'POST',
      headers: { ...browserHeaders(first), 'content-type': 'application/json' },
      body: JSON.stringify({ token: first.token }),
    });
    expect(signIn.status).toBe(200);
    const cookie = /^(leoflow_session=[^;]+)/.exec(signIn.headers.get('set-cookie') ?? '')?.[1];
    expect(cookie).toBeDefined();
    const oneTimeCode = /sign-in#code=(\S+)/.exec(first.output())?.[1];
    expect(oneTimeCode, first.output()).toBeDefined();
    expect((await whoami(first, cookie!)).status).toBe(200);
    await first.stop();

    sa = await startStandalone({ dataDir });
    const second = sa;
    const me = await whoami(second, cookie!);
    expect(me.status).toBe(200);
    expect(await me.json()).toMatchObject({ role: 'admin' });
    // The one-time link of the first start is dead: codes live in memory, by design.
    {
      const reuse = await fetch(`${second.url}/api/ui/session`, {
        method: 'POST',
        headers: { ...browserHeaders(second), 'content-type': 'application/json' },
        body: JSON.stringify({ code: oneTimeCode! }),
      });
      expect(reuse.status).toBe(401);
    }

    const out = await fetch(`${second.url}/api/ui/session`, {
      method: 'DELETE',
      headers: { ...browserHeaders(second), cookie: cookie! },
    });
    expect(await out.json()).toEqual({ signed_out: true });
    expect((await whoami(second, cookie!)).status).toBe(401);
    await second.stop();

    sa = await startStandalone({ dataDir });
    expect((await whoami(sa, cookie!)).status).toBe(401);
  }, 120_000);
});
