import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runnerTokenHash } from '../../src/runners/runner-token.js';
import {
  createApiHarness,
  PLATFORM_TENANT,
  SEEDED_CELL,
  type ApiHarness,
} from '../support/api-harness.js';
import { forEachDialect } from '../support/dialects.js';

const TOKEN = /^lfr_[A-Za-z0-9_-]{43}$/;
const HOST_KEY =
  'box.internal ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl';

forEachDialect('runner records over REST', (dialect) => {
  let h: ApiHarness;
  let admin: string;
  let operator: string;
  let developer: string;
  let viewer: string;

  beforeAll(async () => {
    h = await createApiHarness(dialect);
    admin = await h.tokenFor('team-a', 'admin');
    operator = await h.tokenFor('team-a', 'operator');
    developer = await h.tokenFor('team-a', 'developer');
    viewer = await h.tokenFor('team-a', 'viewer');
  });
  afterAll(() => h.close());

  const register = async (token: string, body: unknown) =>
    h.request(token, 'POST', '/api/v1/runners', body);

  it('registration mints a 256-bit lfr_ token once and prints the launch command with it', async () => {
    const res = await register(operator, {
      name: 'lin-1',
      kind: 'inbound',
      labels: { gpu: 'a100' },
      capacity: 4,
    });
    expect(res.status, res.text).toBe(201);
    const token = res.json.token as string;
    expect(token).toMatch(TOKEN);
    expect(res.json.door_url).toBe(`https://door.test/runners/${token}/`);
    // the token travels on stdin, never in leoflow-runner's argv
    expect(res.json.launch_command).toBe(
      `printf '%s\\n' 'https://door.test/runners/${token}/' | leoflow-runner --url-stdin`,
    );
    expect(res.json.runner).toMatchObject({
      name: 'lin-1',
      kind: 'inbound',
      labels: { gpu: 'a100' },
      capacity: 4,
      ssh: null,
      has_token: true,
    });
    expect(JSON.stringify(res.json.runner)).not.toContain(token);
  });

  it('runners:read sees every field and never the token; runners:create reads it again', async () => {
    const created = await register(admin, { name: 'lin-2', kind: 'inbound' });
    const token = created.json.token as string;
    const asAdmin = await h.request(admin, 'GET', '/api/v1/runners/lin-2');
    for (const reader of [viewer, developer, operator]) {
      const one = await h.request(reader, 'GET', '/api/v1/runners/lin-2');
      expect(one.status).toBe(200);
      expect(one.json).toEqual(asAdmin.json);
      expect(one.text).not.toContain(token);
      expect(one.text).not.toContain(runnerTokenHash(token));
      const list = await h.request(reader, 'GET', '/api/v1/runners');
      expect((list.json.runners as unknown[]).length).toBeGreaterThanOrEqual(2);
      expect(list.text).not.toContain(token);
      expect(list.text).not.toContain('lfr_');
    }
    for (const [who, t] of [
      ['operator', operator],
      ['admin', admin],
    ] as const) {
      const again = await h.request(t, 'POST', '/api/v1/runners/lin-2/reveal-token');
      expect(again.status, who).toBe(200);
      expect(again.json).toEqual({
        name: 'lin-2',
        token,
        door_url: created.json.door_url,
        launch_command: created.json.launch_command,
      });
    }
    for (const t of [viewer, developer]) {
      const refused = await h.request(t, 'POST', '/api/v1/runners/lin-2/reveal-token');
      expect(refused.status).toBe(403);
      expect(refused.text).not.toContain(token);
    }
  });

  it('the directory holds the hash and a ciphertext, never the token in the clear', async () => {
    const created = await register(admin, { name: 'lin-3', kind: 'inbound' });
    const token = created.json.token as string;
    const row = await h.directory.getRunner('team-a', 'lin-3');
    expect(row?.token_hash).toBe(runnerTokenHash(token));
    expect(Buffer.from(row!.token_cipher!).toString('latin1')).not.toContain(token);
    expect(JSON.stringify({ ...row, token_cipher: null })).not.toContain(token);
    expect(await h.directory.runnerByTokenHash(runnerTokenHash(token))).toMatchObject({
      name: 'lin-3',
      tenant_id: 'team-a',
    });
  });

  it('no rotation in place: delete stops the old token at once, register again mints a new one', async () => {
    const first = await register(admin, { name: 'lin-4', kind: 'inbound' });
    const old = first.json.token as string;
    const dup = await register(admin, { name: 'lin-4', kind: 'inbound' });
    expect(dup.status).toBe(409);
    expect(dup.json.code).toBe('LF_RUNNER_EXISTS');
    expect(dup.text).not.toContain(old);
    // the developer may read but not delete
    expect((await h.request(developer, 'DELETE', '/api/v1/runners/lin-4')).status).toBe(403);
    expect(await h.directory.runnerByTokenHash(runnerTokenHash(old))).toBeDefined();
    const del = await h.request(operator, 'DELETE', '/api/v1/runners/lin-4');
    expect(del.status, del.text).toBe(200);
    expect(await h.directory.runnerByTokenHash(runnerTokenHash(old))).toBeUndefined();
    const again = await register(admin, { name: 'lin-4', kind: 'inbound' });
    expect(again.status).toBe(201);
    expect(again.json.token).toMatch(TOKEN);
    expect(again.json.token).not.toBe(old);
    expect(again.json.launch_command).not.toContain(old);
    expect((await h.request(admin, 'GET', '/api/v1/runners/nope')).json.code).toBe(
      'LF_RUNNER_NOT_FOUND',
    );
  });

  it('an ssh runner: pinned host key and an existing credential required; it never has a token', async () => {
    const body = {
      name: 'box-1',
      kind: 'ssh',
      ssh: {
        host: 'box.internal',
        port: 2222,
        user: 'ci',
        credential: 'box_key',
        host_key: HOST_KEY,
      },
    };
    const noConn = await register(admin, body);
    expect(noConn.status).toBe(400);
    expect(noConn.json).toMatchObject({
      code: 'LF_RUNNER_INVALID',
      details: { field: 'ssh.credential' },
    });
    const conn = await h.request(admin, 'PUT', '/api/v1/connections/box_key', {
      uri: 'ssh://ci:unused@box.internal:2222',
    });
    expect(conn.status, conn.text).toBe(200);
    const badKey = await register(admin, {
      ...body,
      ssh: { ...body.ssh, host_key: 'trust-on-first-use' },
    });
    expect(badKey.json).toMatchObject({
      code: 'LF_RUNNER_INVALID',
      details: { field: 'ssh.host_key' },
    });
    const ok = await register(admin, body);
    expect(ok.status, ok.text).toBe(201);
    expect(ok.json).toMatchObject({ token: null, door_url: null, launch_command: null });
    expect(ok.json.runner).toMatchObject({
      kind: 'ssh',
      has_token: false,
      ssh: {
        host: 'box.internal',
        port: 2222,
        user: 'ci',
        credential: 'box_key',
        host_key: HOST_KEY,
      },
    });
    const fp = await register(admin, {
      ...body,
      name: 'box-2',
      ssh: { ...body.ssh, host_key: 'SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8' },
    });
    expect(fp.status, fp.text).toBe(201);
    const reveal = await h.request(admin, 'POST', '/api/v1/runners/box-1/reveal-token');
    expect(reveal.status).toBe(409);
    expect(reveal.json.code).toBe('LF_RUNNER_NO_TOKEN');
    expect((await h.directory.getRunner('team-a', 'box-1'))?.token_hash).toBeNull();
    const inboundWithSsh = await register(admin, { ...body, name: 'x-1', kind: 'inbound' });
    expect(inboundWithSsh.json).toMatchObject({
      code: 'LF_RUNNER_INVALID',
      details: { field: 'ssh' },
    });
  });

  it('register, token read and delete are audited, and no audit entry carries the token', async () => {
    const created = await register(admin, { name: 'lin-5', kind: 'inbound' });
    const token = created.json.token as string;
    await h.request(admin, 'POST', '/api/v1/runners/lin-5/reveal-token');
    await h.request(admin, 'DELETE', '/api/v1/runners/lin-5');
    const audit = await h.request(admin, 'GET', '/api/v1/audit?limit=1000');
    const mine = (audit.json.events as { action: string; resource_id: string }[]).filter(
      (e) => e.resource_id === 'lin-5',
    );
    expect(mine.map((e) => e.action).sort()).toEqual([
      'runner.delete',
      'runner.register',
      'runner.token_read',
    ]);
    expect(audit.text).not.toContain(token);
    expect(audit.text).not.toContain(runnerTokenHash(token));
  });

  it("another tenant cannot see, read the token of, or delete team-a's runner", async () => {
    await register(admin, { name: 'lin-6', kind: 'inbound' });
    const other = await h.tokenFor('team-b', 'admin');
    expect((await h.request(other, 'GET', '/api/v1/runners/lin-6')).status).toBe(404);
    expect((await h.request(other, 'POST', '/api/v1/runners/lin-6/reveal-token')).status).toBe(404);
    expect((await h.request(other, 'DELETE', '/api/v1/runners/lin-6')).status).toBe(404);
    expect((await h.request(other, 'GET', '/api/v1/runners')).json.runners).toEqual([]);
    expect(await h.directory.getRunner('team-a', 'lin-6')).toBeDefined();
  });

  describe('cells and placements (platform admins)', () => {
    it('add, place, move, drain; a draining cell takes no new placement', async () => {
      const platform = await h.tokenFor(PLATFORM_TENANT, 'admin');
      const add = await h.request(platform, 'POST', '/api/v1/cells', {
        name: 'cell-b',
        url: 'http://cell-b.internal:8795',
      });
      expect(add.status, add.text).toBe(201);
      expect(add.json).toMatchObject({
        name: 'cell-b',
        state: 'active',
        tenants: 0,
        implicit: false,
      });
      expect((await h.request(platform, 'POST', '/api/v1/cells', add.json)).status).toBe(400);
      const dup = await h.request(platform, 'POST', '/api/v1/cells', {
        name: 'cell-b',
        url: 'http://x:1',
      });
      expect(dup.json.code).toBe('LF_CELL_EXISTS');
      const bad = await h.request(platform, 'POST', '/api/v1/cells', {
        name: 'cell-c',
        url: 'ftp://x',
      });
      expect(bad.json.code).toBe('LF_CELL_INVALID');
      const place = (tenant: string, cell: string) =>
        h.request(platform, 'PUT', `/api/v1/tenants/${tenant}/placement`, { cell });
      expect((await place('team-a', SEEDED_CELL)).status).toBe(200);
      expect((await h.directory.getPlacement('team-a'))?.cell).toBe(SEEDED_CELL);
      const moved = await place('team-a', 'cell-b');
      expect(moved.json).toMatchObject({ tenant_id: 'team-a', cell: 'cell-b' });
      expect((await place('team-a', 'ghost')).json.code).toBe('LF_CELL_NOT_FOUND');
      const drained = await h.request(platform, 'POST', '/api/v1/cells/cell-b/drain');
      expect(drained.json).toMatchObject({ name: 'cell-b', state: 'draining', tenants: 1 });
      const refused = await place('team-c', 'cell-b');
      expect(refused.status).toBe(409);
      expect(refused.json.code).toBe('LF_CELL_DRAINING');
      // team-a stays where it is until it is placed elsewhere
      expect((await h.directory.getPlacement('team-a'))?.cell).toBe('cell-b');
      const list = await h.request(platform, 'GET', '/api/v1/cells');
      expect((list.json.cells as { name: string }[]).map((c) => c.name)).toEqual([
        SEEDED_CELL,
        'cell-b',
      ]);
      // a tenant admin is not a platform admin
      expect((await place('team-a', SEEDED_CELL)).status).toBe(200);
      expect(
        (await h.request(admin, 'PUT', '/api/v1/tenants/team-a/placement', { cell: SEEDED_CELL }))
          .status,
      ).toBe(403);
    });
  });
});

describe('Lite: one implicit cell', () => {
  let h: ApiHarness;
  beforeAll(async () => {
    h = await createApiHarness('sqlite', {
      cellTopology: { kind: 'lite', url: 'http://127.0.0.1:9' },
    });
  });
  afterAll(() => h.close());

  it('lists its one cell and refuses to add, drain or place', async () => {
    const platform = await h.tokenFor(PLATFORM_TENANT, 'admin');
    const list = await h.request(platform, 'GET', '/api/v1/cells');
    expect(list.json.cells).toEqual([
      {
        name: 'lite',
        url: 'http://127.0.0.1:9',
        state: 'active',
        tenants: 0,
        implicit: true,
        created_at: null,
        updated_at: null,
      },
    ]);
    for (const [method, url, body] of [
      ['POST', '/api/v1/cells', { name: 'x', url: 'http://x:1' }],
      ['POST', `/api/v1/cells/${SEEDED_CELL}/drain`, undefined],
      ['PUT', '/api/v1/tenants/default/placement', { cell: SEEDED_CELL }],
    ] as const) {
      const res = await h.request(platform, method, url, body);
      expect(res.status, url).toBe(409);
      expect(res.json.code).toBe('LF_DIRECTORY_LITE');
    }
  });
});
