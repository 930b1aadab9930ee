import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SESSION_CLOSE } from '@leoflow/protocol';
import { runnerTokenHash } from '../../../src/runners/runner-token.js';
import {
  closed,
  createDoorFixture,
  nextMessage,
  rawGet,
  wsAttempt,
  type DoorFixture,
} from './door-fixture.js';

const totalLookups = (f: DoorFixture) => Object.values(f.lookups).reduce((a, b) => a + b, 0);
const cellCalls = (f: DoorFixture) => f.cellClient.fetchSecret + f.cellClient.openSession;
const withoutDate = (h: Record<string, string>) => {
  const { date: _date, ...rest } = h;
  return rest;
};
const nearMiss = (t: string) => t.slice(0, -1) + (t.endsWith('A') ? 'B' : 'A');

describe('the door', () => {
  let f: DoorFixture;
  let runner: { id: string; token: string };
  const wsUrl = (token: string, action = 'session') =>
    `${f.url.replace('http:', 'ws:')}/runners/${token}/${action}`;

  beforeEach(async () => {
    f = await createDoorFixture();
    await f.addCell('cell-a');
    await f.addCell('cell-b');
    runner = await f.addRunner('team-a', 'lin-1');
    await f.place('team-a', 'cell-a');
  });
  afterEach(() => f.close());

  it('(a) anything but the three GET paths is 404 before any lookup and any cell call', async () => {
    const t = runner.token;
    const paths = [
      '/',
      '/runners',
      '/runners/',
      `/runners/${t}`,
      `/runners/${t}/`,
      `/runners/${t}/other`,
      `/runners/${t}/login/`,
      `/runners/${t}/login/x`,
      `/runners/${t}/login?x=1`,
      `/runners/${t}/LOGIN`,
      `/runners//login`,
      `/runners/${t}/session`, // a session is an upgrade or nothing
      `/api/v1/runners/${t}/login`,
      `/runners/${t}/../login`,
    ];
    for (const p of paths) {
      const r = await rawGet(f.url, p);
      expect(r.status, p).toBe(404);
      expect(JSON.parse(r.body)).toMatchObject({ code: 'LF_ROUTE_NOT_FOUND' });
    }
    for (const method of ['POST', 'PUT', 'DELETE', 'HEAD', 'OPTIONS']) {
      expect((await rawGet(f.url, `/runners/${t}/login`, method)).status, method).toBe(404);
    }
    // an upgrade on login or bundle is outside the grammar too
    for (const action of ['login', 'bundle', 'nope']) {
      const r = await wsAttempt(wsUrl(t, action));
      expect(r.open ? 101 : r.status, action).toBe(404);
    }
    expect(totalLookups(f)).toBe(0);
    expect(cellCalls(f)).toBe(0);
    // ... and the same token on a good path is accepted (the 404s were not a token verdict)
    expect((await rawGet(f.url, `/runners/${t}/login`)).status).toBe(200);
  });

  it('(b) unknown, near-miss, malformed and deleted tokens get one byte-identical 401, no cell call', async () => {
    const gone = await f.addRunner('team-a', 'lin-gone');
    await f.directory.deleteRunner('team-a', 'lin-gone');
    const candidates = [
      nearMiss(runner.token),
      `lfr_${'A'.repeat(43)}`,
      'not-a-token',
      'lfr_',
      gone.token,
      runner.token.toUpperCase(),
      encodeURIComponent(`${runner.token} `),
    ];
    const replies = [];
    for (const c of candidates) replies.push(await rawGet(f.url, `/runners/${c}/login`));
    for (const c of candidates) replies.push(await rawGet(f.url, `/runners/${c}/bundle`));
    const first = replies[0]!;
    expect(first.status).toBe(401);
    expect(JSON.parse(first.body)).toMatchObject({ code: 'LF_RUNNER_UNAUTHORIZED' });
    for (const r of replies) {
      expect(r.status).toBe(401);
      expect(r.body).toBe(first.body);
      expect(withoutDate(r.headers)).toEqual(withoutDate(first.headers));
    }
    // the session upgrade answers the same body
    for (const c of candidates) {
      const r = await wsAttempt(wsUrl(c));
      expect(r.open).toBe(false);
      if (!r.open) {
        expect(r.status).toBe(401);
        expect(r.body).toBe(first.body);
      }
    }
    expect(cellCalls(f)).toBe(0);
    // well-formed tokens cost one hash lookup each, malformed ones none; never a placement read
    expect(f.lookups.getPlacement ?? 0).toBe(0);
    expect(f.lookups.runnerByTokenHash).toBe(3 * 3);
    for (const c of candidates) expect(first.body).not.toContain(c);
  });

  it('(b) a runner that is not inbound is refused with the same 401', async () => {
    // the directory's CHECK keeps token hashes off ssh rows; the door checks the kind anyway
    const other = await createDoorFixture();
    try {
      await other.addCell('cell-a');
      const r = await other.addRunner('team-a', 'lin-1');
      await other.place('team-a', 'cell-a');
      const original = other.directory.runnerByTokenHash.bind(other.directory);
      other.directory.runnerByTokenHash = async (h) => {
        const found = await original(h);
        return found ? { ...found, kind: 'ssh' } : found;
      };
      const res = await rawGet(other.url, `/runners/${r.token}/login`);
      expect(res.status).toBe(401);
      const unknown = await rawGet(other.url, `/runners/${nearMiss(r.token)}/login`);
      expect(res.body).toBe(unknown.body);
      expect(cellCalls(other)).toBe(0);
    } finally {
      await other.close();
    }
  });

  it('(c) a tenant with no placement gets 503 with a jittered Retry-After and no cell call', async () => {
    const unplaced = await f.addRunner('team-z', 'lin-z');
    f.random.value = 0;
    const low = await rawGet(f.url, `/runners/${unplaced.token}/login`);
    f.random.value = 0.999;
    const high = await rawGet(f.url, `/runners/${unplaced.token}/login`);
    const ws = await wsAttempt(wsUrl(unplaced.token));
    expect(low.status).toBe(503);
    expect(JSON.parse(low.body)).toMatchObject({ code: 'LF_RUNNER_NOT_PLACED' });
    expect(low.headers['retry-after']).toBe('5');
    expect(high.headers['retry-after']).toBe('10');
    expect(ws.open ? 101 : ws.status).toBe(503);
    expect(cellCalls(f)).toBe(0);
    // placed now: the same token works without any change on the machine
    await f.place('team-z', 'cell-b');
    expect((await rawGet(f.url, `/runners/${unplaced.token}/login`)).status).toBe(200);
  });

  it('login is 200 for a good token and a placed tenant, and calls no cell; bundle serves the file', async () => {
    const login = await rawGet(f.url, `/runners/${runner.token}/login`);
    expect(login.status).toBe(200);
    const bundle = await rawGet(f.url, `/runners/${runner.token}/bundle`);
    expect(bundle.status).toBe(200);
    expect(bundle.body).toBe('export const bundle = "runner";\n');
    expect(cellCalls(f)).toBe(0);
  });

  it('(d) every session attempt fetches a fresh secret from the cell; frames relay both ways', async () => {
    const one = await wsAttempt(wsUrl(runner.token));
    expect(one.open).toBe(true);
    if (!one.open) return;
    const secret1 = f.cellClient.lastSecret;
    one.ws.send('hello');
    expect(await nextMessage(one.ws)).toBe(`cell-a:${runner.id}:hello`);
    // the runner never sees the secret, not even in the upgrade's reply headers
    expect(JSON.stringify(one.headers)).not.toContain(secret1);
    const two = await wsAttempt(wsUrl(runner.token));
    expect(two.open).toBe(true);
    expect(f.cells.get('cell-a')!.calls).toEqual({ secrets: 2, sessions: 2 });
    expect(f.cellClient.lastSecret).not.toBe(secret1);
    expect(f.cells.get('cell-a')!.sessions.count(runner.id)).toBe(2);
    // the secret was single-use: both are gone from the cell
    expect(f.cells.get('cell-a')!.secrets.outstanding).toBe(0);
    one.ws.close();
    if (two.open) two.ws.close();
  });

  it('moving the tenant sends the next session to the new cell; the old one sees no call', async () => {
    const first = await wsAttempt(wsUrl(runner.token));
    expect(first.open).toBe(true);
    await f.place('team-a', 'cell-b');
    const second = await wsAttempt(wsUrl(runner.token));
    expect(second.open).toBe(true);
    if (!second.open || !first.open) return;
    second.ws.send('x');
    expect(await nextMessage(second.ws)).toBe(`cell-b:${runner.id}:x`);
    expect(f.cells.get('cell-a')!.calls).toEqual({ secrets: 1, sessions: 1 });
    expect(f.cells.get('cell-b')!.calls).toEqual({ secrets: 1, sessions: 1 });
    // the session already on cell-a stays until it drops (docs/runners.md)
    first.ws.send('y');
    expect(await nextMessage(first.ws)).toBe(`cell-a:${runner.id}:y`);
    first.ws.close();
    second.ws.close();
  });

  it('an unreachable cell is 503 and a refusing cell 502, both with Retry-After, never 401', async () => {
    await f.directory.insertCell({
      name: 'cell-dead',
      url: 'http://127.0.0.1:9',
      state: 'active',
      created_at: 0,
      updated_at: 0,
    });
    await f.addCell('cell-stranger', { trustDoor: false });
    await f.place('team-a', 'cell-dead');
    const dead = await wsAttempt(wsUrl(runner.token));
    expect(dead.open ? 101 : dead.status).toBe(503);
    if (!dead.open) {
      expect(JSON.parse(dead.body)).toMatchObject({ code: 'LF_CELL_UNREACHABLE' });
      expect(Number(dead.headers['retry-after'])).toBeGreaterThanOrEqual(5);
    }
    await f.place('team-a', 'cell-stranger');
    const refused = await wsAttempt(wsUrl(runner.token));
    expect(refused.open ? 101 : refused.status).toBe(502);
    if (!refused.open) {
      expect(JSON.parse(refused.body)).toMatchObject({ code: 'LF_CELL_REFUSED' });
      expect(refused.headers['retry-after']).toBeDefined();
    }
    expect(f.cells.get('cell-stranger')!.sessions.count()).toBe(0);
  });

  it("deleting a runner closes its live sessions (the door's re-check), and its token is refused at once", async () => {
    const a = await wsAttempt(wsUrl(runner.token));
    const other = await f.addRunner('team-a', 'lin-2');
    const b = await wsAttempt(wsUrl(other.token));
    if (!a.open || !b.open) throw new Error('sessions did not open');
    expect(await f.door.recheckSessions()).toBe(0);
    const closing = closed(a.ws);
    await f.directory.deleteRunner('team-a', 'lin-1');
    expect(await f.door.recheckSessions()).toBe(1);
    expect(await closing).toEqual(SESSION_CLOSE.runnerDeleted);
    // the other runner's session is untouched
    b.ws.send('still');
    expect(await nextMessage(b.ws)).toBe(`cell-a:${other.id}:still`);
    expect((await rawGet(f.url, `/runners/${runner.token}/login`)).status).toBe(401);
    b.ws.close();
  });

  it('a runner deleted between the token check and the secret fetch gets no secret (502)', async () => {
    // the door's view is stale (a cache, a race); the cell checks the runner itself
    const stale = await f.directory.runnerByTokenHash(runnerTokenHash(runner.token));
    await f.directory.deleteRunner('team-a', 'lin-1');
    const original = f.directory.runnerByTokenHash.bind(f.directory);
    f.directory.runnerByTokenHash = async (h) => (await original(h)) ?? stale;
    const r = await wsAttempt(wsUrl(runner.token));
    expect(r.open ? 101 : r.status).toBe(502);
    expect(f.cells.get('cell-a')!.calls.secrets).toBe(1);
    expect(f.cells.get('cell-a')!.sessions.count()).toBe(0);
  });

  it("a cell closing a deleted runner's sessions closes the runner's side too", async () => {
    const a = await wsAttempt(wsUrl(runner.token));
    if (!a.open) throw new Error('session did not open');
    const closing = closed(a.ws);
    expect(
      f.cells.get('cell-a')!.sessions.closeRunner(runner.id, SESSION_CLOSE.runnerDeleted),
    ).toBe(1);
    expect(await closing).toEqual(SESSION_CLOSE.runnerDeleted);
  });

  it('the token never reaches a log line or a metric label; paths are logged redacted', async () => {
    await rawGet(f.url, `/runners/${runner.token}/login`);
    await rawGet(f.url, `/runners/${nearMiss(runner.token)}/login`);
    await rawGet(f.url, `/runners/${runner.token}/nope`);
    const s = await wsAttempt(wsUrl(runner.token));
    if (s.open) s.ws.close();
    const logs = f.logLines.join('');
    expect(logs).toContain('/runners/<redacted>/login');
    expect(logs).not.toContain(runner.token);
    expect(logs).not.toContain(nearMiss(runner.token));
    expect(logs).not.toContain(runner.token.slice(4, 20));
    if (f.cellClient.lastSecret) expect(logs).not.toContain(f.cellClient.lastSecret);
    const metrics = await f.door.metrics.metrics();
    expect(metrics).toContain('leoflow_door_requests_total{path="login",status="200"} 1');
    expect(metrics).not.toContain(runner.token);
  });
});

describe('the door: repeated 401s', () => {
  let f: DoorFixture;
  beforeEach(async () => {
    f = await createDoorFixture({ throttle: { limit: 3, windowMs: 60_000 } });
    await f.addCell('cell-a');
  });
  afterEach(() => f.close());

  it('a source past the limit gets the same 401 without a lookup until its window ends', async () => {
    const r = await f.addRunner('team-a', 'lin-1');
    await f.place('team-a', 'cell-a');
    const bad = nearMiss(r.token);
    // under the limit, a good token from the same source is never refused
    for (let i = 0; i < 2; i++)
      expect((await rawGet(f.url, `/runners/${bad}/login`)).status).toBe(401);
    expect((await rawGet(f.url, `/runners/${r.token}/login`)).status).toBe(200);
    const third = await rawGet(f.url, `/runners/${bad}/login`);
    const lookupsBefore = f.lookups.runnerByTokenHash;
    const throttled = await rawGet(f.url, `/runners/${r.token}/login`);
    expect(throttled.status).toBe(401);
    expect(throttled.body).toBe(third.body);
    expect(withoutDate(throttled.headers)).toEqual(withoutDate(third.headers));
    expect(f.lookups.runnerByTokenHash).toBe(lookupsBefore);
    f.clock.advance(59_999);
    expect((await rawGet(f.url, `/runners/${r.token}/login`)).status).toBe(401);
    f.clock.advance(1);
    expect((await rawGet(f.url, `/runners/${r.token}/login`)).status).toBe(200);
  });
});

describe('the door in Lite: one implicit cell', () => {
  let f: DoorFixture;
  beforeEach(async () => {
    f = await createDoorFixture({
      topology: () => ({ kind: 'lite', url: 'http://127.0.0.1:9' }),
    });
  });
  afterEach(() => f.close());

  it('needs no placement: every tenant is on the one cell', async () => {
    const r = await f.addRunner('default', 'lin-1');
    expect((await rawGet(f.url, `/runners/${r.token}/login`)).status).toBe(200);
    expect(f.lookups.getPlacement ?? 0).toBe(0);
    // and that cell is where a session goes (down here: 503, never 401)
    const s = await wsAttempt(`${f.url.replace('http:', 'ws:')}/runners/${r.token}/session`);
    expect(s.open ? 101 : s.status).toBe(503);
    expect(f.cellClient.fetchSecret).toBe(1);
  });
});
