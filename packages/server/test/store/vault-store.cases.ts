import { randomBytes, randomUUID } from 'node:crypto';
import type { TaskInstanceState } from '@leoflow/core';
import { describe, expect, it } from 'vitest';
import type { DagRunRow, Store, TaskInstanceRow } from '../../src/store/index.js';
import type { ConnectionRecord, VariableRecord } from '../../src/store/vault-types.js';
import { minimalSpec } from '../support/spec-builders.js';

/** What the shared storage suite hands to the vault cases (same store, same helpers). */
export interface VaultStoreCaseContext {
  store(): Store;
  /** a second store over the same database */
  open(): Promise<Store>;
  newTenant(label?: string): Promise<string>;
  fixture(label?: string): Promise<{
    tenant_id: string;
    dag_id: string;
    run: DagRunRow;
    extract: TaskInstanceRow;
    load: TaskInstanceRow;
  }>;
  T0: number;
}

const ALL_STATES: TaskInstanceState[] = [
  'none',
  'scheduled',
  'queued',
  'running',
  'success',
  'failed',
  'skipped',
  'upstream_failed',
  'up_for_retry',
  'up_for_reschedule',
];

export function registerVaultStoreCases(ctx: VaultStoreCaseContext): void {
  const { T0 } = ctx;
  const store = () => ctx.store();
  const page = (limit = 100, offset = 0) => ({ limit, offset });

  function plainVar(tenant_id: string, key: string, value = `v-${key}`): VariableRecord {
    return {
      tenant_id,
      key,
      value_text: value,
      value_cipher: null,
      key_id: null,
      is_secret: false,
      description: '',
      dag_grants: null, // every DAG: a new secret's default (migration 0013)
      created_at: T0,
      updated_at: T0,
    };
  }

  function secretVar(
    tenant_id: string,
    key: string,
    key_id = 'k-test',
    cipher: Uint8Array = new Uint8Array(randomBytes(40)),
  ): VariableRecord {
    return {
      tenant_id,
      key,
      value_text: null,
      value_cipher: cipher,
      key_id,
      is_secret: true,
      description: `secret ${key}`,
      dag_grants: null,
      created_at: T0,
      updated_at: T0,
    };
  }

  function conn(
    tenant_id: string,
    conn_id: string,
    sealed: { key_id: string; cipher?: Uint8Array } | null = {
      key_id: 'k-test',
    },
  ): ConnectionRecord {
    return {
      tenant_id,
      conn_id,
      conn_type: 'postgres',
      host: 'db.internal',
      login: 'etl',
      schema: 'warehouse',
      port: 5432,
      description: `conn ${conn_id}`,
      secret_cipher: sealed === null ? null : (sealed.cipher ?? new Uint8Array(randomBytes(48))),
      key_id: sealed === null ? null : sealed.key_id,
      dag_grants: null,
      created_at: T0,
      updated_at: T0,
    };
  }

  const keysOf = (recs: VariableRecord[]) => recs.map((r) => r.key).sort();
  const idsOf = (recs: ConnectionRecord[]) => recs.map((r) => r.conn_id).sort();

  describe('vault: variables', () => {
    it('round-trips plain and sealed variables exactly', async () => {
      const t = await ctx.newTenant('var');
      const plain = { ...plainVar(t, 'region', 'eu-west-1 ünïcode 🚀'), description: 'where' };
      const sealed = secretVar(t, 'api_key', 'k-1', new Uint8Array([1, 0, 255, 7, 0]));
      await store().putVariable(plain);
      await store().putVariable(sealed);
      expect(await store().getVariable(t, 'region')).toEqual(plain);
      const got = await store().getVariable(t, 'api_key');
      expect(got).toEqual(sealed);
      expect(got?.value_cipher).toBeInstanceOf(Uint8Array);
      expect(Buffer.isBuffer(got?.value_cipher)).toBe(false);
      expect(await store().getVariable(t, 'missing')).toBeUndefined();
    });

    it('an overwrite replaces everything but created_at, including secret ⇄ plain', async () => {
      const t = await ctx.newTenant('var');
      await store().putVariable(plainVar(t, 'k', 'one'));
      const secret = { ...secretVar(t, 'k', 'k-2'), created_at: T0 + 50, updated_at: T0 + 50 };
      await store().putVariable(secret);
      expect(await store().getVariable(t, 'k')).toEqual({ ...secret, created_at: T0 });
      await store().putVariable({ ...plainVar(t, 'k', 'three'), updated_at: T0 + 99 });
      expect(await store().getVariable(t, 'k')).toMatchObject({
        value_text: 'three',
        value_cipher: null,
        key_id: null,
        is_secret: false,
        created_at: T0,
        updated_at: T0 + 99,
      });
      expect(await store().countVariables(t)).toBe(1);
    });

    it('refuses rows that would hold a secret in the clear or a cipher without its key id', async () => {
      const t = await ctx.newTenant('var');
      await expect(
        store().putVariable({ ...secretVar(t, 'a'), value_text: 'plaintext!' }),
      ).rejects.toThrow();
      await expect(store().putVariable({ ...secretVar(t, 'b'), key_id: null })).rejects.toThrow();
      await expect(
        store().putVariable({ ...plainVar(t, 'c'), value_cipher: new Uint8Array([1]) }),
      ).rejects.toThrow();
      await expect(store().putConnection({ ...conn(t, 'd'), key_id: null })).rejects.toThrow();
      expect(await store().countVariables(t)).toBe(0);
      expect(await store().countConnections(t)).toBe(0);
    });

    it('lists in key order with paging, counts and deletes', async () => {
      const t = await ctx.newTenant('var');
      for (const k of ['c', 'a', 'e', 'b', 'd']) await store().putVariable(plainVar(t, k));
      const keys = async (limit: number, offset: number) =>
        (await store().listVariables(t, { limit, offset })).map((v) => v.key);
      expect(await keys(2, 0)).toEqual(['a', 'b']);
      expect(await keys(2, 2)).toEqual(['c', 'd']);
      expect(await keys(10, 4)).toEqual(['e']);
      expect(await store().countVariables(t)).toBe(5);
      expect(keysOf(await store().getAllVariables(t))).toEqual(['a', 'b', 'c', 'd', 'e']);
      expect(await store().deleteVariable(t, 'c')).toBe(true);
      expect(await store().deleteVariable(t, 'c')).toBe(false);
      expect(await store().getVariable(t, 'c')).toBeUndefined();
      expect(await store().countVariables(t)).toBe(4);
    });

    it('getVariablesByKeys returns exactly the named keys that exist', async () => {
      const t = await ctx.newTenant('var');
      for (const k of ['a', 'b', 'c', 'A']) await store().putVariable(plainVar(t, k));
      await store().putVariable(secretVar(t, 's'));
      expect(keysOf(await store().getVariablesByKeys(t, ['b', 's', 'nope']))).toEqual(['b', 's']);
      // Case-sensitive, and a repeated name yields one row.
      expect(keysOf(await store().getVariablesByKeys(t, ['a', 'a', 'a']))).toEqual(['a']);
      expect(keysOf(await store().getVariablesByKeys(t, ['A']))).toEqual(['A']);
      expect(await store().getVariablesByKeys(t, ['zzz'])).toEqual([]);
      expect(await store().getVariablesByKeys(t, [])).toEqual([]);
      // Larger than one IN list: the chunks must add up.
      const many = Array.from({ length: 1_234 }, (_, i) => `missing-${i}`);
      expect(keysOf(await store().getVariablesByKeys(t, [...many, 'c', 'a']))).toEqual(['a', 'c']);
      expect(await store().existingVariableKeys(t, [...many, 'b', 'A', 'x'])).toEqual(
        new Set(['b', 'A']),
      );
      expect(await store().existingVariableKeys(t, [])).toEqual(new Set());
    });

    it('empty name lists answer without touching the database', async () => {
      // A closed store fails every query, so resolving proves no query was made.
      const closed = await ctx.open();
      await closed.migrate();
      await closed.close();
      await expect(closed.getVariablesByKeys('t', [])).resolves.toEqual([]);
      await expect(closed.getConnectionsByIds('t', [])).resolves.toEqual([]);
      await expect(closed.existingVariableKeys('t', [])).resolves.toEqual(new Set());
      await expect(closed.existingConnectionIds('t', [])).resolves.toEqual(new Set());
      await expect(closed.getVariablesByKeys('t', ['a'])).rejects.toThrow();
      await expect(closed.getConnectionsByIds('t', ['a'])).rejects.toThrow();
    });

    it('rejects a variable for an unknown tenant', async () => {
      await expect(store().putVariable(plainVar(`ghost-${randomUUID()}`, 'k'))).rejects.toThrow();
    });
  });

  describe('vault: connections', () => {
    it('round-trips with and without sealed material and overwrites keeping created_at', async () => {
      const t = await ctx.newTenant('conn');
      const withSecret = conn(t, 'warehouse', { key_id: 'k-1' });
      const bare: ConnectionRecord = {
        ...conn(t, 'http_default', null),
        conn_type: 'http',
        host: null,
        login: null,
        schema: null,
        port: null,
      };
      await store().putConnection(withSecret);
      await store().putConnection(bare);
      expect(await store().getConnection(t, 'warehouse')).toEqual(withSecret);
      expect(await store().getConnection(t, 'http_default')).toEqual(bare);
      expect(await store().getConnection(t, 'nope')).toBeUndefined();

      const changed = {
        ...conn(t, 'warehouse', { key_id: 'k-2' }),
        host: 'db2',
        port: 6543,
        created_at: T0 + 10,
        updated_at: T0 + 10,
      };
      await store().putConnection(changed);
      expect(await store().getConnection(t, 'warehouse')).toEqual({ ...changed, created_at: T0 });
      await store().putConnection({ ...conn(t, 'warehouse', null), updated_at: T0 + 20 });
      expect(await store().getConnection(t, 'warehouse')).toMatchObject({
        secret_cipher: null,
        key_id: null,
        updated_at: T0 + 20,
      });
    });

    it('lists in id order with paging, filters by ids in the query, counts and deletes', async () => {
      const t = await ctx.newTenant('conn');
      for (const id of ['c', 'a', 'b']) await store().putConnection(conn(t, id));
      expect((await store().listConnections(t, page(2, 0))).map((c) => c.conn_id)).toEqual([
        'a',
        'b',
      ]);
      expect((await store().listConnections(t, page(2, 2))).map((c) => c.conn_id)).toEqual(['c']);
      expect(idsOf(await store().getConnectionsByIds(t, ['c', 'a', 'zz', 'c']))).toEqual([
        'a',
        'c',
      ]);
      expect(await store().getConnectionsByIds(t, [])).toEqual([]);
      const many = Array.from({ length: 1_100 }, (_, i) => `nope-${i}`);
      expect(idsOf(await store().getConnectionsByIds(t, [...many, 'b']))).toEqual(['b']);
      expect(idsOf(await store().getAllConnections(t))).toEqual(['a', 'b', 'c']);
      expect(await store().existingConnectionIds(t, ['a', 'x', 'c'])).toEqual(new Set(['a', 'c']));
      expect(await store().existingConnectionIds(t, [])).toEqual(new Set());
      expect(await store().countConnections(t)).toBe(3);
      expect(await store().deleteConnection(t, 'a')).toBe(true);
      expect(await store().deleteConnection(t, 'a')).toBe(false);
      expect(await store().countConnections(t)).toBe(2);
    });
  });

  describe('vault: secret grants (issue 34)', () => {
    it('a secret is granted to every DAG until its grants are set; they round-trip, read with the existence check', async () => {
      const t = await ctx.newTenant('grants');
      await store().putVariable(secretVar(t, 'token'));
      await store().putConnection(conn(t, 'warehouse'));
      expect(await store().getSecretGrants(t, 'variables', ['token', 'missing'])).toEqual(
        new Map([['token', null]]),
      );
      expect(
        await store().setSecretGrants(t, 'variables', 'token', ['etl_*', 'report'], T0 + 1),
      ).toBe(true);
      expect(await store().setSecretGrants(t, 'connections', 'warehouse', [], T0 + 1)).toBe(true);
      expect(await store().setSecretGrants(t, 'connections', 'missing', null, T0 + 1)).toBe(false);
      expect(await store().getSecretGrants(t, 'variables', ['token'])).toEqual(
        new Map([['token', ['etl_*', 'report']]]),
      );
      expect(await store().getSecretGrants(t, 'connections', ['warehouse'])).toEqual(
        new Map([['warehouse', []]]),
      );
      expect((await store().getVariable(t, 'token'))?.dag_grants).toEqual(['etl_*', 'report']);
      expect((await store().getConnectionsByIds(t, ['warehouse']))[0]?.dag_grants).toEqual([]);
      expect((await store().getSecretGrants(t, 'variables', [])).size).toBe(0);
    });

    it('re-setting a secret keeps its grants; another tenant’s same name is untouched', async () => {
      const t = await ctx.newTenant('grants-keep');
      const other = await ctx.newTenant('grants-other');
      await store().putVariable(secretVar(t, 'token'));
      await store().putVariable(secretVar(other, 'token'));
      await store().setSecretGrants(t, 'variables', 'token', ['only_me'], T0 + 1);
      await store().putVariable({ ...secretVar(t, 'token'), updated_at: T0 + 2 });
      expect((await store().getVariable(t, 'token'))?.dag_grants).toEqual(['only_me']);
      expect((await store().getVariable(other, 'token'))?.dag_grants).toBeNull();
      await store().setSecretGrants(t, 'variables', 'token', null, T0 + 3);
      expect((await store().getVariable(t, 'token'))?.dag_grants).toBeNull();
    });
  });

  describe('vault: tenant isolation', () => {
    it('no vault method reads or deletes another tenant’s values', async () => {
      const a = await ctx.newTenant('vault-a');
      const b = await ctx.newTenant('vault-b');
      await store().putVariable(plainVar(a, 'shared', 'from-a'));
      await store().putVariable(plainVar(b, 'shared', 'from-b'));
      await store().putVariable(secretVar(a, 'only-a'));
      await store().putConnection(conn(a, 'db'));
      await store().putConnection({ ...conn(b, 'db'), host: 'b-host' });
      await store().putConnection(conn(a, 'only-a'));

      expect((await store().getVariable(b, 'shared'))?.value_text).toBe('from-b');
      expect(await store().getVariable(b, 'only-a')).toBeUndefined();
      expect(keysOf(await store().getVariablesByKeys(b, ['shared', 'only-a']))).toEqual(['shared']);
      expect(keysOf(await store().getAllVariables(b))).toEqual(['shared']);
      expect(keysOf(await store().listVariables(b, page()))).toEqual(['shared']);
      expect(await store().countVariables(b)).toBe(1);
      expect(await store().existingVariableKeys(b, ['only-a', 'shared'])).toEqual(
        new Set(['shared']),
      );

      expect((await store().getConnection(b, 'db'))?.host).toBe('b-host');
      expect(await store().getConnection(b, 'only-a')).toBeUndefined();
      expect(idsOf(await store().getConnectionsByIds(b, ['db', 'only-a']))).toEqual(['db']);
      expect(idsOf(await store().getAllConnections(b))).toEqual(['db']);
      expect(idsOf(await store().listConnections(b, page()))).toEqual(['db']);
      expect(await store().countConnections(b)).toBe(1);
      expect(await store().existingConnectionIds(b, ['only-a'])).toEqual(new Set());

      expect(await store().deleteVariable(b, 'only-a')).toBe(false);
      expect(await store().deleteConnection(b, 'only-a')).toBe(false);
      expect(await store().deleteVariable(b, 'shared')).toBe(true);
      expect(await store().deleteConnection(b, 'db')).toBe(true);
      expect((await store().getVariable(a, 'shared'))?.value_text).toBe('from-a');
      expect(await store().getConnection(a, 'db')).toBeDefined();
      expect(await store().getVariable(a, 'only-a')).toBeDefined();
    });

    it('a reseal aimed at one tenant never touches the same name in another', async () => {
      const a = await ctx.newTenant('vault-a');
      const b = await ctx.newTenant('vault-b');
      const old = `k-${randomUUID().slice(0, 8)}`;
      await store().putVariable(secretVar(a, 'k', old));
      const bRec = secretVar(b, 'k', old);
      await store().putVariable(bRec);
      expect(
        await store().resealValue('variable', a, 'k', old, new Uint8Array([9]), 'k-new', T0),
      ).toBe(true);
      expect(await store().getVariable(b, 'k')).toEqual(bRec);
    });
  });

  describe('vault: key rotation support', () => {
    /** Key ids unique to one test: the database is shared, and these methods span tenants. */
    const freshKey = () => `k-${randomUUID().slice(0, 8)}`;

    it('listSealedNotUnderKey returns sealed values of both kinds not under the key, bounded by limit', async () => {
      const t = await ctx.newTenant('rot');
      const oldKey = freshKey();
      const current = freshKey();
      const v1 = secretVar(t, 'v1', oldKey);
      await store().putVariable(v1);
      await store().putVariable(secretVar(t, 'v2', current));
      await store().putVariable(plainVar(t, 'plain'));
      const c1 = conn(t, 'c1', { key_id: oldKey });
      await store().putConnection(c1);
      await store().putConnection(conn(t, 'c2', { key_id: current }));
      await store().putConnection(conn(t, 'bare', null));

      const mine = (await store().listSealedNotUnderKey(current, 100_000)).filter(
        (r) => r.tenant_id === t,
      );
      expect(mine).toEqual([
        { kind: 'variable', tenant_id: t, id: 'v1', key_id: oldKey, cipher: v1.value_cipher },
        { kind: 'connection', tenant_id: t, id: 'c1', key_id: oldKey, cipher: c1.secret_cipher },
      ]);
      expect(await store().listSealedNotUnderKey(current, 1)).toHaveLength(1);
      expect(await store().listSealedNotUnderKey(current, 0)).toEqual([]);
    });

    it('resealValue is a compare-and-set on the key id', async () => {
      const t = await ctx.newTenant('rot');
      const oldKey = freshKey();
      const newKey = freshKey();
      await store().putVariable({ ...secretVar(t, 's', oldKey), updated_at: T0 + 7 });
      await store().putVariable(plainVar(t, 'p'));
      await store().putConnection({ ...conn(t, 'c', { key_id: oldKey }), updated_at: T0 + 8 });
      const next = new Uint8Array([7, 7, 7]);

      expect(await store().resealValue('variable', t, 's', oldKey, next, newKey, T0 + 100)).toBe(
        true,
      );
      // The expectation no longer holds: a second (racing) rotation loses.
      expect(
        await store().resealValue('variable', t, 's', oldKey, new Uint8Array([1]), newKey, T0),
      ).toBe(false);
      expect(await store().getVariable(t, 's')).toMatchObject({
        value_cipher: next,
        key_id: newKey,
        is_secret: true,
        // Re-encrypting is not setting the value.
        updated_at: T0 + 7,
      });

      expect(await store().resealValue('connection', t, 'c', oldKey, next, newKey, T0)).toBe(true);
      expect(await store().getConnection(t, 'c')).toMatchObject({
        secret_cipher: next,
        key_id: newKey,
        updated_at: T0 + 8,
      });
      expect(await store().resealValue('connection', t, 'c', oldKey, next, newKey, T0)).toBe(false);

      // Plain values, missing rows and a kind/name mismatch never match.
      expect(await store().resealValue('variable', t, 'p', oldKey, next, newKey, T0)).toBe(false);
      expect(await store().resealValue('variable', t, 'nope', oldKey, next, newKey, T0)).toBe(
        false,
      );
      expect(await store().resealValue('connection', t, 's', newKey, next, oldKey, T0)).toBe(false);
      expect((await store().getVariable(t, 'p'))?.value_text).toBe('v-p');
    });

    it('resealIfUnchanged also requires the exact old ciphertext', async () => {
      const t = await ctx.newTenant('rot');
      const oldKey = freshKey();
      const newKey = freshKey();
      await store().putVariable(secretVar(t, 's', oldKey));
      await store().putConnection(conn(t, 'c', { key_id: oldKey }));
      const [vRef, cRef] = (await store().listSealedNotUnderKey(newKey, 100_000)).filter(
        (r) => r.tenant_id === t,
      );
      if (vRef === undefined || cRef === undefined) throw new Error('refs missing');

      // A writer still sealing under the old key replaced the value after we read it.
      const newer = secretVar(t, 's', oldKey);
      await store().putVariable(newer);
      expect(await store().resealIfUnchanged(vRef, new Uint8Array([1]), newKey, T0)).toBe(false);
      expect(await store().getVariable(t, 's')).toEqual(newer);

      expect(await store().resealIfUnchanged(cRef, new Uint8Array([2]), newKey, T0)).toBe(true);
      expect(await store().getConnection(t, 'c')).toMatchObject({
        secret_cipher: new Uint8Array([2]),
        key_id: newKey,
      });
      expect(await store().resealIfUnchanged(cRef, new Uint8Array([3]), newKey, T0)).toBe(false);
    });

    it('countSealedByKeyId counts sealed variables and connections per key id', async () => {
      const t = await ctx.newTenant('rot');
      const k1 = freshKey();
      const k2 = freshKey();
      await store().putVariable(secretVar(t, 'a', k1));
      await store().putVariable(secretVar(t, 'b', k1));
      await store().putVariable(plainVar(t, 'c'));
      await store().putConnection(conn(t, 'x', { key_id: k1 }));
      await store().putConnection(conn(t, 'y', { key_id: k2 }));
      await store().putConnection(conn(t, 'z', null));
      const counts = await store().countSealedByKeyId();
      expect(counts.get(k1)).toBe(3);
      expect(counts.get(k2)).toBe(1);
      expect([...counts.values()].every((n) => typeof n === 'number' && n > 0)).toBe(true);
    });
  });

  describe('vault: audit log', () => {
    it('appends and lists newest first, filtered by tenant, time and action, paged', async () => {
      const t = await ctx.newTenant('audit');
      const other = await ctx.newTenant('audit');
      const rec = (at: number, action: string, payload: Record<string, unknown> = {}) => ({
        tenant_id: t,
        at,
        actor: 'user:alice',
        action,
        resource_type: 'connection',
        resource_id: 'warehouse',
        request_id: at === T0 ? null : `req-${at}`,
        payload,
      });
      await store().appendAudit(rec(T0, 'connection.set', { fields: ['host'], n: 1, ok: true }));
      await store().appendAudit(rec(T0 + 10, 'secret.scope_warning', { declared: 1, vault: 3 }));
      await store().appendAudit(rec(T0 + 10, 'connection.delete'));
      await store().appendAudit(rec(T0 + 20, 'connection.set'));
      await store().appendAudit({ ...rec(T0 + 30, 'connection.set'), tenant_id: other });

      const all = await store().listAudit(t, {}, page());
      expect(all.map((r) => [r.at, r.action])).toEqual([
        [T0 + 20, 'connection.set'],
        // Same millisecond: the later insert first.
        [T0 + 10, 'connection.delete'],
        [T0 + 10, 'secret.scope_warning'],
        [T0, 'connection.set'],
      ]);
      expect(all[3]).toEqual({
        id: expect.any(Number),
        ...rec(T0, 'connection.set', { fields: ['host'], n: 1, ok: true }),
      });
      expect(all[1]?.request_id).toBe(`req-${T0 + 10}`);
      const ids = all.map((r) => r.id);
      expect([...ids].sort((x, y) => y - x)).toEqual(ids);

      expect((await store().listAudit(t, { since: T0 + 10 }, page())).map((r) => r.at)).toEqual([
        T0 + 20,
        T0 + 10,
        T0 + 10,
      ]);
      expect(
        (await store().listAudit(t, { action: 'connection.set' }, page())).map((r) => r.at),
      ).toEqual([T0 + 20, T0]);
      expect(
        await store().listAudit(t, { action: 'connection.set', since: T0 + 21 }, page()),
      ).toEqual([]);
      expect((await store().listAudit(t, {}, page(2, 1))).map((r) => r.action)).toEqual([
        'connection.delete',
        'secret.scope_warning',
      ]);
      expect((await store().listAudit(other, {}, page())).map((r) => r.at)).toEqual([T0 + 30]);
    });
  });

  describe('vault: attempt liveness and revocation', () => {
    async function inState(state: TaskInstanceState) {
      const fx = await ctx.fixture('live');
      expect(
        await store().updateTaskInstance(fx.extract.id, { states: ['none'] }, { state }, T0),
      ).toBe(true);
      return fx;
    }

    it('is live exactly for queued and running at the row’s try', async () => {
      for (const state of ALL_STATES) {
        const { run } = await inState(state);
        const live = state === 'queued' || state === 'running';
        expect(await store().getAttemptLiveness(run.id, 'extract', 1), state).toEqual({
          live,
          revoked: false,
        });
        // Another try, task or run is never live.
        expect(await store().getAttemptLiveness(run.id, 'extract', 2)).toEqual({
          live: false,
          revoked: false,
        });
        expect(await store().getAttemptLiveness(run.id, 'extract', 0)).toEqual({
          live: false,
          revoked: false,
        });
      }
      const { run } = await inState('running');
      expect(await store().getAttemptLiveness(run.id, 'nope', 1)).toEqual({
        live: false,
        revoked: false,
      });
      expect(await store().getAttemptLiveness(randomUUID(), 'extract', 1)).toEqual({
        live: false,
        revoked: false,
      });
    });

    it('a superseded try is not live; the new try is live once queued', async () => {
      const { run, extract } = await inState('running');
      expect(
        await store().archiveAndBumpTry(
          extract.id,
          { states: ['running'], try_number: 1 },
          'failed',
          { state: 'none' },
          T0 + 1,
        ),
      ).toBe(true);
      expect(await store().getAttemptLiveness(run.id, 'extract', 1)).toEqual({
        live: false,
        revoked: false,
      });
      expect((await store().getAttemptLiveness(run.id, 'extract', 2)).live).toBe(false);
      await store().updateTaskInstance(extract.id, { states: ['none'] }, { state: 'queued' }, T0);
      expect((await store().getAttemptLiveness(run.id, 'extract', 2)).live).toBe(true);
      expect((await store().getAttemptLiveness(run.id, 'extract', 1)).live).toBe(false);
    });

    it('has no recency, run-state or logical-date term: a year-old finished run, cleared, is live', async () => {
      const t = await ctx.newTenant('old');
      const yearAgo = T0 - 366 * 86_400_000;
      await store().putDagVersion(t, minimalSpec('old'), 'h', yearAgo);
      const run = await store().createRun({
        tenant_id: t,
        dag_id: 'old',
        run_id: 'scheduled__last-year',
        run_type: 'scheduled',
        dag_version: 1,
        logical_date: yearAgo,
        data_interval_start: yearAgo - 86_400_000,
        data_interval_end: yearAgo,
        conf: {},
        tasks: [{ task_id: 'extract', max_tries: 1 }],
        now: yearAgo,
      });
      if (run === undefined) throw new Error('run not created');
      await store().setRunState(run.id, ['queued'], 'success', {
        started_at: yearAgo,
        ended_at: yearAgo + 1,
      });
      const row = (await store().listTaskInstances(run.id))[0];
      if (row === undefined) throw new Error('no task instance');
      await store().updateTaskInstance(row.id, { states: ['none'] }, { state: 'success' }, yearAgo);
      // Clear: archive try 1, re-queue as try 2. The run itself stays "success" and old.
      await store().archiveAndBumpTry(
        row.id,
        { states: ['success'] },
        'success',
        { state: 'queued' },
        T0,
      );
      expect(await store().getAttemptLiveness(run.id, 'extract', 2)).toEqual({
        live: true,
        revoked: false,
      });
    });

    it('revocation applies to exactly one try and shows in liveness and heartbeats', async () => {
      const { run, extract } = await inState('running');
      const before = await store().getTaskInstanceById(extract.id);
      expect(await store().revokeAttemptCredential(extract.id, 2, T0 + 1)).toBe(false);
      expect(await store().revokeAttemptCredential(randomUUID(), 1, T0 + 1)).toBe(false);
      expect(await store().getAttemptLiveness(run.id, 'extract', 1)).toEqual({
        live: true,
        revoked: false,
      });

      expect(await store().revokeAttemptCredential(extract.id, 1, T0 + 1)).toBe(true);
      expect(await store().revokeAttemptCredential(extract.id, 1, T0 + 2)).toBe(true);
      // Revoked, yet still live: revocation stops secrets and renewal, not the task.
      expect(await store().getAttemptLiveness(run.id, 'extract', 1)).toEqual({
        live: true,
        revoked: true,
      });
      expect(await store().recordHeartbeat(extract.id, 1, T0 + 3)).toEqual({
        kind: 'live',
        terminate_requested: false,
        credential_revoked: true,
      });
      const after = await store().getTaskInstanceById(extract.id);
      expect(after?.updated_at).toBe(before?.updated_at);
      expect(after?.state).toBe('running');

      // The other task of the same run is untouched.
      expect((await store().getAttemptLiveness(run.id, 'load', 1)).revoked).toBe(false);

      // A finished, revoked attempt still reports the revocation.
      await store().updateTaskInstance(
        extract.id,
        { states: ['running'] },
        { state: 'failed' },
        T0,
      );
      expect(await store().getAttemptLiveness(run.id, 'extract', 1)).toEqual({
        live: false,
        revoked: true,
      });
    });

    it('revocation survives nothing across a try bump (retry or clear)', async () => {
      const { run, extract } = await inState('running');
      await store().revokeAttemptCredential(extract.id, 1, T0 + 1);
      expect(
        await store().archiveAndBumpTry(
          extract.id,
          { states: ['running'], try_number: 1 },
          'failed',
          { state: 'queued' },
          T0 + 2,
        ),
      ).toBe(true);
      expect(await store().getAttemptLiveness(run.id, 'extract', 2)).toEqual({
        live: true,
        revoked: false,
      });
      expect(await store().recordHeartbeat(extract.id, 2, T0 + 3)).toEqual({
        kind: 'live',
        terminate_requested: false,
        credential_revoked: false,
      });
      // The old try's revocation cannot be re-applied to the new attempt by mistake.
      expect(await store().revokeAttemptCredential(extract.id, 1, T0 + 4)).toBe(false);
      expect((await store().getAttemptLiveness(run.id, 'extract', 2)).revoked).toBe(false);
      // Revoking the new try works, and the next bump clears it again.
      expect(await store().revokeAttemptCredential(extract.id, 2, T0 + 5)).toBe(true);
      expect((await store().getAttemptLiveness(run.id, 'extract', 2)).revoked).toBe(true);
      await store().archiveAndBumpTry(
        extract.id,
        { states: ['queued'], try_number: 2 },
        'failed',
        { state: 'running' },
        T0 + 6,
      );
      expect(await store().getAttemptLiveness(run.id, 'extract', 3)).toEqual({
        live: true,
        revoked: false,
      });
    });
  });
}
