import { randomBytes, randomUUID } from 'node:crypto';
import { inspect } from 'node:util';
import { isLeoflowError, type Connection, type LeoflowError } from '@leoflow/core';
import { afterEach, describe, expect, it } from 'vitest';
import { RunnerRegistry } from '../../src/runners/runner-registry.js';
import { runnerTokenHash } from '../../src/runners/runner-token.js';
import type { Directory } from '../../src/store/kysely-directory.js';
import type { Store } from '../../src/store/store.js';
import type { SealedRef } from '../../src/store/vault-types.js';
import { Keyring, type KeyringEntry } from '../../src/vault/keyring.js';
import { generateSecretKey, parseSecretKey, secretKeyId } from '../../src/vault/secret-key.js';
import { VaultService, type UnreadableValue } from '../../src/vault/vault-service.js';

export interface FreshDatabase {
  store: Store;
  /** the runners' directory beside it (Lite: the same file; Pro: a schema of its own) */
  directory: Directory;
  /** every byte the database keeps for the vault tables, as raw as the dialect allows */
  dump(): Promise<Buffer>;
}

export interface VaultSuiteHarness {
  /**
   * A new, migrated, empty database of its own. Rotation spans every tenant of a database,
   * so tests that rotate cannot share one.
   */
  fresh(): Promise<FreshDatabase>;
}

const T0 = 1_760_000_000_000;

function key(): KeyringEntry {
  const k = generateSecretKey();
  return { id: secretKeyId(k), key: k };
}

async function rejection(p: Promise<unknown>): Promise<LeoflowError> {
  try {
    await p;
  } catch (err) {
    if (isLeoflowError(err)) return err;
    throw err;
  }
  throw new Error('expected a LeoflowError');
}

function pg(password: string | null, extra: Record<string, unknown> | null = null): Connection {
  return {
    conn_type: 'postgres',
    host: 'db.internal',
    login: 'etl',
    password,
    schema: 'warehouse',
    port: 5432,
    extra,
  };
}

export function registerVaultSuite(harness: VaultSuiteHarness): void {
  const open: { close(): Promise<void> }[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => s.close()));
  });

  async function fresh(): Promise<FreshDatabase> {
    const db = await harness.fresh();
    open.push(db.directory, db.store);
    return db;
  }

  async function tenant(store: Store, label = 't'): Promise<string> {
    const id = `${label}-${randomUUID()}`;
    await store.ensureTenant(id, label, T0);
    return id;
  }

  /** Seeds secrets of both kinds in two tenants, plus plain variables; returns the expectations. */
  async function seed(vault: VaultService, store: Store, nVars: number, nConns: number) {
    const tenants = [await tenant(store, 'a'), await tenant(store, 'b')];
    const vars = new Map<string, string>();
    const conns = new Map<string, Connection>();
    for (let i = 0; i < nVars; i++) {
      const t = tenants[i % 2] ?? '';
      const value = `secret-${i}-${randomBytes(6).toString('hex')}`;
      await vault.setVariable(t, `var_${i}`, value, { secret: true }, T0);
      vars.set(`${t}/var_${i}`, value);
    }
    for (let i = 0; i < nConns; i++) {
      const t = tenants[i % 2] ?? '';
      const c = pg(`pw-${i}-${randomBytes(4).toString('hex')}`, { sslmode: 'require', i });
      await vault.setConnection(t, `conn_${i}`, c, '', T0);
      conns.set(`${t}/conn_${i}`, c);
    }
    await vault.setVariable(tenants[0] ?? '', 'plain', 'not secret', { secret: false }, T0);
    return { tenants, vars, conns };
  }

  async function expectAllReadable(
    vault: VaultService,
    seeded: { vars: Map<string, string>; conns: Map<string, Connection> },
  ): Promise<void> {
    for (const [path, value] of seeded.vars) {
      const [t, k] = path.split('/') as [string, string];
      expect((await vault.getVariable(t, k))?.value, path).toBe(value);
    }
    for (const [path, c] of seeded.conns) {
      const [t, id] = path.split('/') as [string, string];
      expect((await vault.getConnection(t, id))?.conn, path).toEqual(c);
    }
  }

  describe('variables', () => {
    it('secret values are sealed in the store and decrypted on read; plain ones are not', async () => {
      const { store } = await fresh();
      const vault = new VaultService(store, new Keyring(key()));
      const t = await tenant(store);
      await vault.setVariable(
        t,
        'api_key',
        'hunter2 ünïcode',
        { secret: true, description: 'd' },
        T0,
      );
      await vault.setVariable(t, 'region', 'eu-west-1', { secret: false }, T0);

      const raw = await store.getVariable(t, 'api_key');
      expect(raw).toMatchObject({ is_secret: true, value_text: null, key_id: vault.currentKeyId });
      expect(Buffer.from(raw?.value_cipher ?? []).includes('hunter2')).toBe(false);
      expect(await store.getVariable(t, 'region')).toMatchObject({
        value_text: 'eu-west-1',
        value_cipher: null,
        key_id: null,
      });

      expect(await vault.getVariable(t, 'api_key')).toEqual({
        key: 'api_key',
        value: 'hunter2 ünïcode',
        is_secret: true,
        description: 'd',
        created_at: T0,
        updated_at: T0,
        grants: null, // every DAG of the tenant (issue 34's default)
      });
      expect(await vault.getVariable(t, 'nope')).toBeUndefined();
      expect(await vault.listVariables(t, { limit: 10, offset: 0 })).toEqual([
        {
          key: 'api_key',
          value: null,
          is_secret: true,
          description: 'd',
          created_at: T0,
          updated_at: T0,
          grants: null, // every DAG of the tenant (issue 34's default)
        },
        {
          key: 'region',
          value: 'eu-west-1',
          is_secret: false,
          description: '',
          created_at: T0,
          updated_at: T0,
          grants: null, // every DAG of the tenant (issue 34's default)
        },
      ]);
    });

    it('an update keeps created_at and (when not given) the description; secret ⇄ plain both ways', async () => {
      const { store } = await fresh();
      const vault = new VaultService(store, new Keyring(key()));
      const t = await tenant(store);
      await vault.setVariable(t, 'k', 'one', { secret: false, description: 'kept' }, T0);
      await vault.setVariable(t, 'k', 'two', { secret: true }, T0 + 5);
      expect(await vault.getVariable(t, 'k')).toEqual({
        key: 'k',
        value: 'two',
        is_secret: true,
        description: 'kept',
        created_at: T0,
        updated_at: T0 + 5,
        grants: null, // every DAG of the tenant (issue 34's default)
      });
      await vault.setVariable(t, 'k', 'three', { secret: false, description: 'new' }, T0 + 6);
      expect(await store.getVariable(t, 'k')).toMatchObject({
        value_text: 'three',
        value_cipher: null,
        key_id: null,
        description: 'new',
      });
      expect(await vault.deleteVariable(t, 'k')).toBe(true);
      expect(await vault.deleteVariable(t, 'k')).toBe(false);
      expect(await vault.getVariable(t, 'k')).toBeUndefined();
    });

    it('rejects unusable names with LF_INVALID_ARGUMENT', async () => {
      const { store } = await fresh();
      const vault = new VaultService(store, new Keyring(key()));
      const t = await tenant(store);
      for (const bad of ['', 'x'.repeat(251), 'a\0b']) {
        expect((await rejection(vault.setVariable(t, bad, 'v', { secret: true }, T0))).code).toBe(
          'LF_INVALID_ARGUMENT',
        );
        expect((await rejection(vault.setConnection(t, bad, pg('p'), '', T0))).code).toBe(
          'LF_INVALID_ARGUMENT',
        );
      }
      for (const port of [-1, 70_000, 1.5]) {
        expect(
          (await rejection(vault.setConnection(t, 'c', { ...pg('p'), port }, '', T0))).code,
        ).toBe('LF_INVALID_ARGUMENT');
      }
      expect(
        (await rejection(vault.setConnection(t, 'c', { ...pg('p'), conn_type: '' }, '', T0))).code,
      ).toBe('LF_INVALID_ARGUMENT');
      expect(await store.countConnections(t)).toBe(0);
    });
  });

  describe('connections', () => {
    it('seals password and extra together; host, login, schema, port and type stay in clear columns', async () => {
      const { store } = await fresh();
      const vault = new VaultService(store, new Keyring(key()));
      const t = await tenant(store);
      const c = pg('p@ss:w/rd', { sslmode: 'require', nested: { list: [1, 'two'] } });
      await vault.setConnection(t, 'warehouse', c, 'main db', T0);
      const raw = await store.getConnection(t, 'warehouse');
      expect(raw).toMatchObject({
        conn_type: 'postgres',
        host: 'db.internal',
        login: 'etl',
        schema: 'warehouse',
        port: 5432,
        description: 'main db',
        key_id: vault.currentKeyId,
      });
      const cipher = Buffer.from(raw?.secret_cipher ?? []);
      expect(cipher.includes('p@ss')).toBe(false);
      expect(cipher.includes('sslmode')).toBe(false);
      expect(await vault.getConnection(t, 'warehouse')).toEqual({
        id: 'warehouse',
        conn: c,
        description: 'main db',
        created_at: T0,
        updated_at: T0,
        grants: null, // every DAG of the tenant (issue 34's default)
      });
    });

    it('a connection with neither password nor extra stores no ciphertext', async () => {
      const { store } = await fresh();
      const vault = new VaultService(store, new Keyring(key()));
      const t = await tenant(store);
      await vault.setConnection(t, 'http', { ...pg(null), conn_type: 'http', port: null }, '', T0);
      expect(await store.getConnection(t, 'http')).toMatchObject({
        secret_cipher: null,
        key_id: null,
      });
      expect((await vault.getConnection(t, 'http'))?.conn).toEqual({
        ...pg(null),
        conn_type: 'http',
        port: null,
      });
      // Extra alone, password alone.
      await vault.setConnection(t, 'x', pg(null, { a: 1 }), '', T0);
      await vault.setConnection(t, 'y', pg('only-pw'), '', T0);
      expect((await vault.getConnection(t, 'x'))?.conn).toEqual(pg(null, { a: 1 }));
      expect((await vault.getConnection(t, 'y'))?.conn).toEqual(pg('only-pw'));
    });

    it('lists metadata only: no password and no extra', async () => {
      const { store } = await fresh();
      const vault = new VaultService(store, new Keyring(key()));
      const t = await tenant(store);
      await vault.setConnection(t, 'b', pg('pw-b', { token: 'tok' }), 'B', T0);
      await vault.setConnection(t, 'a', { ...pg(null), conn_type: 'http' }, 'A', T0 + 1);
      const list = await vault.listConnections(t, { limit: 10, offset: 0 });
      expect(list).toEqual([
        {
          conn_id: 'a',
          conn_type: 'http',
          host: 'db.internal',
          login: 'etl',
          schema: 'warehouse',
          port: 5432,
          description: 'A',
          has_secret: false,
          created_at: T0 + 1,
          updated_at: T0 + 1,
          grants: null, // every DAG of the tenant (issue 34's default)
        },
        {
          conn_id: 'b',
          conn_type: 'postgres',
          host: 'db.internal',
          login: 'etl',
          schema: 'warehouse',
          port: 5432,
          description: 'B',
          has_secret: true,
          created_at: T0,
          updated_at: T0,
          grants: null, // every DAG of the tenant (issue 34's default)
        },
      ]);
      expect(JSON.stringify(list)).not.toMatch(/pw-b|tok|password|extra/);
      expect(await vault.deleteConnection(t, 'b')).toBe(true);
      expect(await vault.getConnection(t, 'b')).toBeUndefined();
    });
  });

  describe('row binding (AAD)', () => {
    it('ciphertexts swapped between two rows fail to open in both', async () => {
      const { store } = await fresh();
      const vault = new VaultService(store, new Keyring(key()));
      const t = await tenant(store);
      await vault.setVariable(t, 'one', 'value-one', { secret: true }, T0);
      await vault.setVariable(t, 'two', 'value-two', { secret: true }, T0);
      const one = await store.getVariable(t, 'one');
      const two = await store.getVariable(t, 'two');
      if (one === undefined || two === undefined) throw new Error('missing');
      await store.putVariable({ ...one, value_cipher: two.value_cipher });
      await store.putVariable({ ...two, value_cipher: one.value_cipher });
      for (const k of ['one', 'two']) {
        const err = await rejection(vault.getVariable(t, k));
        expect(err.code).toBe('LF_SECRET_DECRYPT_FAILED');
        expect(err.message).not.toMatch(/value-one|value-two/);
      }
    });

    it('a ciphertext copied to another tenant, or from a connection into a variable, fails', async () => {
      const { store } = await fresh();
      const vault = new VaultService(store, new Keyring(key()));
      const a = await tenant(store, 'a');
      const b = await tenant(store, 'b');
      await vault.setVariable(a, 'k', 'a-secret', { secret: true }, T0);
      await vault.setVariable(b, 'k', 'b-secret', { secret: true }, T0);
      await vault.setConnection(a, 'k', pg('conn-pw'), '', T0);
      const fromA = await store.getVariable(a, 'k');
      const bRow = await store.getVariable(b, 'k');
      const conn = await store.getConnection(a, 'k');
      if (fromA === undefined || bRow === undefined || conn === undefined)
        throw new Error('missing');

      await store.putVariable({ ...bRow, value_cipher: fromA.value_cipher });
      expect((await rejection(vault.getVariable(b, 'k'))).code).toBe('LF_SECRET_DECRYPT_FAILED');
      await store.putVariable({ ...fromA, value_cipher: conn.secret_cipher });
      expect((await rejection(vault.getVariable(a, 'k'))).code).toBe('LF_SECRET_DECRYPT_FAILED');
      await store.putConnection({ ...conn, secret_cipher: bRow.value_cipher });
      expect((await rejection(vault.getConnection(a, 'k'))).code).toBe('LF_SECRET_DECRYPT_FAILED');
    });
  });

  describe('delivery', () => {
    it('a declared list reads and decrypts only the declared names (filtered in the query)', async () => {
      const { store } = await fresh();
      const calls: string[] = [];
      const unreadable: UnreadableValue[] = [];
      const ring = new Keyring(key());
      const vault = new VaultService(spyStore(store, calls), ring, {
        onUnreadable: (u) => unreadable.push(u),
      });
      const t = await tenant(store);
      await vault.setVariable(t, 'a', 'A', { secret: true }, T0);
      await vault.setVariable(t, 'b', 'B', { secret: false }, T0);
      // An undeclared value that would blow up if anyone tried to decrypt it.
      await store.putVariable({
        tenant_id: t,
        key: 'poison',
        value_text: null,
        value_cipher: new Uint8Array(randomBytes(40)),
        key_id: ring.currentKeyId,
        is_secret: true,
        description: '',
        created_at: T0,
        updated_at: T0,
      });
      await vault.setConnection(t, 'db', pg('pw', { x: 1 }), '', T0);
      await vault.setConnection(t, 'other', pg('other-pw'), '', T0);
      calls.length = 0;

      expect(await vault.resolveVariables(t, ['a', 'b', 'missing'])).toEqual(
        new Map([
          ['a', 'A'],
          ['b', 'B'],
        ]),
      );
      expect(await vault.resolveConnections(t, ['db'])).toEqual(
        new Map([['db', pg('pw', { x: 1 })]]),
      );
      expect(unreadable).toEqual([]);
      expect(calls).toEqual(['getVariablesByKeys', 'getConnectionsByIds']);

      // An empty declaration touches nothing at all.
      calls.length = 0;
      expect(await vault.resolveVariables(t, [])).toEqual(new Map());
      expect(await vault.resolveConnections(t, [])).toEqual(new Map());
      expect(calls).toEqual([]);

      // 'all' is the whole tenant vault; the unreadable value is skipped and reported.
      const all = await vault.resolveVariables(t, 'all');
      expect([...all.keys()].sort()).toEqual(['a', 'b']);
      expect(unreadable).toEqual([
        {
          kind: 'variable',
          tenant_id: t,
          id: 'poison',
          key_id: ring.currentKeyId,
          code: 'LF_SECRET_DECRYPT_FAILED',
        },
      ]);
      expect([...(await vault.resolveConnections(t, 'all')).keys()].sort()).toEqual([
        'db',
        'other',
      ]);
      expect(calls).toEqual(['getAllVariables', 'getAllConnections']);
    });

    it('never delivers another tenant’s values', async () => {
      const { store } = await fresh();
      const vault = new VaultService(store, new Keyring(key()));
      const a = await tenant(store, 'a');
      const b = await tenant(store, 'b');
      await vault.setVariable(a, 'shared', 'from-a', { secret: true }, T0);
      await vault.setVariable(a, 'only_a', 'x', { secret: true }, T0);
      await vault.setVariable(b, 'shared', 'from-b', { secret: true }, T0);
      await vault.setConnection(a, 'only_a', pg('a-pw'), '', T0);
      expect(await vault.resolveVariables(b, ['shared', 'only_a'])).toEqual(
        new Map([['shared', 'from-b']]),
      );
      expect(await vault.resolveVariables(b, 'all')).toEqual(new Map([['shared', 'from-b']]));
      expect(await vault.resolveConnections(b, ['only_a'])).toEqual(new Map());
      expect(await vault.resolveConnections(b, 'all')).toEqual(new Map());
    });

    it('a value whose key is missing is skipped with LF_SECRET_KEY_MISSING, the rest delivered', async () => {
      const { store } = await fresh();
      const lost = key();
      const t = await tenant(store);
      await new VaultService(store, new Keyring(lost)).setVariable(
        t,
        'old',
        'o',
        { secret: true },
        T0,
      );
      const unreadable: UnreadableValue[] = [];
      const vault = new VaultService(store, new Keyring(key()), {
        onUnreadable: (u) => unreadable.push(u),
      });
      await vault.setVariable(t, 'new', 'n', { secret: true }, T0);
      expect(await vault.resolveVariables(t, ['old', 'new'])).toEqual(new Map([['new', 'n']]));
      expect(unreadable).toEqual([
        {
          kind: 'variable',
          tenant_id: t,
          id: 'old',
          key_id: lost.id,
          code: 'LF_SECRET_KEY_MISSING',
        },
      ]);
      const err = await rejection(vault.getVariable(t, 'old'));
      expect(err.code).toBe('LF_SECRET_KEY_MISSING');
      expect(err.message).toContain(lost.id);
    });
  });

  describe('runner tokens under key rotation', () => {
    function registry(vault: VaultService, directory: Directory): RunnerRegistry {
      return new RunnerRegistry({
        runners: directory,
        vault,
        connectionExists: () => Promise.resolve(true),
        clock: { now: () => T0 },
        doorUrl: null,
      });
    }

    async function registerInbound(
      vault: VaultService,
      directory: Directory,
      t: string,
      name: string,
    ): Promise<string> {
      const { token } = await registry(vault, directory).register(
        t,
        { name, kind: 'inbound' },
        'user:test',
      );
      if (token === null) throw new Error('an inbound runner has a token');
      return token.token;
    }

    it('a runner token sealed under the old key is re-sealed under the new one and opens once the old key is gone', async () => {
      const { store, directory } = await fresh();
      const [k1, k2] = [key(), key()];
      const t = await tenant(store);
      const old = new VaultService(store, new Keyring(k1), { runnerTokens: directory });
      const token = await registerInbound(old, directory, t, 'lin-1');
      await old.setVariable(t, 'api_key', 'v1', { secret: true }, T0);
      const before = await directory.getRunner(t, 'lin-1');
      expect(before?.token_key_id).toBe(k1.id);

      const vault = new VaultService(store, new Keyring(k2, [k1]), { runnerTokens: directory });
      expect(await vault.rotateKeys({ batchSize: 1 })).toEqual({ resealed: 2 });
      expect(await vault.remainingUnderOldKeys()).toBe(0);
      const after = await directory.getRunner(t, 'lin-1');
      expect(after?.token_key_id).toBe(k2.id);
      expect(after?.token_cipher).not.toEqual(before?.token_cipher);
      // the door looks it up by its hash: that does not change
      expect(after?.token_hash).toBe(runnerTokenHash(token));

      const onlyNew = new VaultService(store, new Keyring(k2), { runnerTokens: directory });
      expect((await registry(onlyNew, directory).revealToken(t, 'lin-1')).token).toBe(token);
      expect((await onlyNew.getVariable(t, 'api_key'))?.value).toBe('v1');
    });

    it('before rotation runs, remainingUnderOldKeys and keyUsage count the runner token (ssh runners carry none)', async () => {
      const { store, directory } = await fresh();
      const [k1, k2] = [key(), key()];
      const t = await tenant(store);
      const old = new VaultService(store, new Keyring(k1), { runnerTokens: directory });
      await registerInbound(old, directory, t, 'lin-1');
      await registry(old, directory).register(
        t,
        {
          name: 'box-1',
          kind: 'ssh',
          ssh: {
            host: 'box.internal',
            user: 'ci',
            credential: 'box_key',
            host_key: 'SHA256:' + 'A'.repeat(43),
          },
        },
        'user:test',
      );

      // Only a runner token is sealed: told "0 remaining", an operator would drop k1 and lose it.
      const vault = new VaultService(store, new Keyring(k2, [k1]), { runnerTokens: directory });
      expect(await vault.remainingUnderOldKeys()).toBe(1);
      expect(await vault.keyUsage()).toEqual([
        { key_id: k2.id, sealed: 0, in_keyring: true, current: true },
        { key_id: k1.id, sealed: 1, in_keyring: true, current: false },
      ]);
      await vault.rotateKeys({ batchSize: 10 });
      expect(await vault.keyUsage()).toEqual([
        { key_id: k2.id, sealed: 1, in_keyring: true, current: true },
        { key_id: k1.id, sealed: 0, in_keyring: true, current: false },
      ]);
    });

    it('a runner token replaced between rotation reading it and its compare-and-set is not overwritten', async () => {
      const { store, directory } = await fresh();
      const [k1, k2] = [key(), key()];
      const t = await tenant(store);
      // a replica still on the old keyring: it seals the replacement under k1 too
      const stale = new VaultService(store, new Keyring(k1), { runnerTokens: directory });
      const first = await registerInbound(stale, directory, t, 'lin-1');
      const replacement = `lfr_${randomBytes(32).toString('base64url')}`;
      let replaced = false;
      const racing = new Proxy(directory, {
        get(target, prop, receiver) {
          if (prop === 'resealRunnerTokenIfUnchanged') {
            return async (ref: SealedRef, cipher: Uint8Array, new_key_id: string) => {
              if (!replaced) {
                replaced = true;
                const row = await target.getRunner(t, 'lin-1');
                if (row === undefined) throw new Error('missing');
                const sealed = stale.sealRunnerToken(t, row.id, replacement);
                await target.deleteRunner(t, 'lin-1');
                await target.insertRunner({
                  ...row,
                  token_hash: runnerTokenHash(replacement),
                  token_cipher: sealed.cipher,
                  token_key_id: sealed.key_id,
                });
              }
              return target.resealRunnerTokenIfUnchanged(ref, cipher, new_key_id);
            };
          }
          const v: unknown = Reflect.get(target, prop, receiver);
          return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        },
      });
      const vault = new VaultService(store, new Keyring(k2, [k1]), { runnerTokens: racing });
      // the first CAS misses (the row changed under it); the next batch re-reads and re-seals
      expect(await vault.rotateKeys({ batchSize: 5 })).toEqual({ resealed: 1 });
      expect(replaced).toBe(true);
      expect(await vault.remainingUnderOldKeys()).toBe(0);
      const onlyNew = new VaultService(store, new Keyring(k2), { runnerTokens: directory });
      const revealed = (await registry(onlyNew, directory).revealToken(t, 'lin-1')).token;
      // compared as booleans: a red run prints no token
      expect(revealed === replacement).toBe(true);
      expect(revealed === first).toBe(false);
    });

    it("another cell's runner token (under a key this keyring never held) is neither re-sealed nor counted", async () => {
      const { store, directory } = await fresh();
      const [k1, k2, otherCell] = [key(), key(), key()];
      const t = await tenant(store);
      const other = new VaultService(store, new Keyring(otherCell), { runnerTokens: directory });
      const theirs = await registerInbound(other, directory, t, 'theirs');
      const old = new VaultService(store, new Keyring(k1), { runnerTokens: directory });
      const ours = await registerInbound(old, directory, t, 'ours');
      const before = await directory.getRunner(t, 'theirs');

      const vault = new VaultService(store, new Keyring(k2, [k1]), { runnerTokens: directory });
      expect(await vault.remainingUnderOldKeys()).toBe(1);
      expect(await vault.rotateKeys({ batchSize: 10 })).toEqual({ resealed: 1 });
      expect(await vault.remainingUnderOldKeys()).toBe(0);
      expect((await vault.keyUsage()).map((u) => u.key_id).sort()).toEqual([k1.id, k2.id].sort());
      expect(await directory.getRunner(t, 'theirs')).toEqual(before);
      expect((await registry(other, directory).revealToken(t, 'theirs')).token).toBe(theirs);
      expect((await registry(vault, directory).revealToken(t, 'ours')).token).toBe(ours);
    });
  });

  describe('key rotation', () => {
    it('a keyring replaced mid-rotation: each value is stored under the key that sealed it, and all still open', async () => {
      const { store } = await fresh();
      const [k1, k2, k3] = [key(), key(), key()];
      const seeded = await seed(new VaultService(store, new Keyring(k1)), store, 6, 4);
      const vault = new VaultService(store, new Keyring(k2, [k1]));
      await vault.rotateKeys({
        batchSize: 2,
        onProgress: (done) => {
          // another replica's keyring reload lands while this rotation runs
          if (done === 2) vault.replaceKeyring(new Keyring(k3, [k2, k1]));
        },
      });
      const counts = await store.countSealedByKeyId();
      expect(counts.get(k1.id) ?? 0).toBe(0);
      expect((counts.get(k2.id) ?? 0) + (counts.get(k3.id) ?? 0)).toBe(10);
      // the stored key id names the key that sealed each value: a keyring of those keys opens all
      const reader = new VaultService(store, new Keyring(k3, [k2]));
      await expectAllReadable(reader, seeded);
    });

    it('interrupted halfway and resumed: every secret still decrypts, all end under the new key', async () => {
      const { store } = await fresh();
      const k1 = key();
      const k2 = key();
      const seeded = await seed(new VaultService(store, new Keyring(k1)), store, 24, 10);
      const total = 34;

      const vault = new VaultService(store, new Keyring(k2, [k1]));
      expect(await vault.remainingUnderOldKeys()).toBe(total);
      const controller = new AbortController();
      const progress: number[] = [];
      await expect(
        vault.rotateKeys({
          batchSize: 5,
          signal: controller.signal,
          onProgress: (done) => {
            progress.push(done);
            if (done >= 15) controller.abort();
          },
        }),
      ).rejects.toThrow();
      expect(progress).toEqual([5, 10, 15]);
      expect(await vault.remainingUnderOldKeys()).toBe(total - 15);
      // Halfway: a mix of keys, all readable with the keyring as it is.
      expect(await store.countSealedByKeyId()).toEqual(
        new Map([
          [k1.id, total - 15],
          [k2.id, 15],
        ]),
      );
      await expectAllReadable(vault, seeded);

      // Resumed by a new process (a new service over the same database).
      const resumed = new VaultService(store, new Keyring(k2, [k1]));
      expect(await resumed.rotateKeys({ batchSize: 7 })).toEqual({ resealed: total - 15 });
      expect(await resumed.remainingUnderOldKeys()).toBe(0);
      expect(await store.countSealedByKeyId()).toEqual(new Map([[k2.id, total]]));
      // Nothing left to do.
      expect(await resumed.rotateKeys({ batchSize: 7 })).toEqual({ resealed: 0 });
      // The old key can go now: the new key alone reads everything.
      await expectAllReadable(new VaultService(store, new Keyring(k2)), seeded);
      expect((await resumed.getVariable(seeded.tenants[0] ?? '', 'plain'))?.value).toBe(
        'not secret',
      );
    });

    it('a crash in the middle of a batch loses nothing and a rerun finishes', async () => {
      const { store } = await fresh();
      const k1 = key();
      const k2 = key();
      const seeded = await seed(new VaultService(store, new Keyring(k1)), store, 9, 6);
      let reseals = 0;
      const crashing = new Proxy(store, {
        get(target, prop, receiver) {
          if (prop === 'resealIfUnchanged') {
            return async (...args: Parameters<Store['resealIfUnchanged']>) => {
              reseals += 1;
              if (reseals === 8) throw new Error('simulated crash');
              return target.resealIfUnchanged(...args);
            };
          }
          const v: unknown = Reflect.get(target, prop, receiver);
          return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        },
      });
      await expect(
        new VaultService(crashing, new Keyring(k2, [k1])).rotateKeys({ batchSize: 4 }),
      ).rejects.toThrow('simulated crash');
      const vault = new VaultService(store, new Keyring(k2, [k1]));
      expect(await vault.remainingUnderOldKeys()).toBe(15 - 7);
      await expectAllReadable(vault, seeded);
      expect(await vault.rotateKeys({ batchSize: 4 })).toEqual({ resealed: 8 });
      await expectAllReadable(new VaultService(store, new Keyring(k2)), seeded);
    });

    it('rotates a keyring with several old keys in one pass', async () => {
      const { store } = await fresh();
      const [k1, k2, k3] = [key(), key(), key()];
      const s1 = await seed(new VaultService(store, new Keyring(k1)), store, 4, 2);
      const s2 = await seed(new VaultService(store, new Keyring(k2, [k1])), store, 4, 2);
      const vault = new VaultService(store, new Keyring(k3, [k2, k1]));
      expect(await vault.keyUsage()).toEqual([
        { key_id: k3.id, sealed: 0, in_keyring: true, current: true },
        { key_id: k2.id, sealed: 6, in_keyring: true, current: false },
        { key_id: k1.id, sealed: 6, in_keyring: true, current: false },
      ]);
      expect(await vault.rotateKeys({ batchSize: 100 })).toEqual({ resealed: 12 });
      const only = new VaultService(store, new Keyring(k3));
      await expectAllReadable(only, s1);
      await expectAllReadable(only, s2);
    });

    it('a write that lands during rotation is never overwritten (new-key and stale old-key writers)', async () => {
      const { store } = await fresh();
      const k1 = key();
      const k2 = key();
      const stale = new VaultService(store, new Keyring(k1));
      const seeded = await seed(stale, store, 6, 2);
      const t = seeded.tenants[0] ?? '';
      const current = new VaultService(store, new Keyring(k2, [k1]));

      // Land each write between rotation's read of a value and its compare-and-set.
      const interleave = new Map<string, () => Promise<void>>([
        [
          'var_0',
          () => current.setVariable(t, 'var_0', 'newest-current', { secret: true }, T0 + 1),
        ],
        // A replica that still runs the old keyring writes under k1: a CAS on the key id alone
        // would let rotation replace this with the re-encrypted older value.
        ['var_2', () => stale.setVariable(t, 'var_2', 'newest-stale', { secret: true }, T0 + 1)],
        ['conn_0', () => stale.setConnection(t, 'conn_0', pg('newest-conn-pw'), '', T0 + 1)],
      ]);
      const racing = new Proxy(store, {
        get(target, prop, receiver) {
          if (prop === 'resealIfUnchanged') {
            return async (ref: SealedRef, ...rest: [Uint8Array, string, number]) => {
              const write = interleave.get(ref.id);
              if (write !== undefined && ref.tenant_id === t) {
                interleave.delete(ref.id);
                await write();
              }
              return target.resealIfUnchanged(ref, ...rest);
            };
          }
          const v: unknown = Reflect.get(target, prop, receiver);
          return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        },
      });
      await new VaultService(racing, new Keyring(k2, [k1])).rotateKeys({ batchSize: 3 });
      expect(interleave.size).toBe(0);
      expect(await current.remainingUnderOldKeys()).toBe(0);
      expect((await current.getVariable(t, 'var_0'))?.value).toBe('newest-current');
      expect((await current.getVariable(t, 'var_2'))?.value).toBe('newest-stale');
      expect((await current.getConnection(t, 'conn_0'))?.conn.password).toBe('newest-conn-pw');
      const onlyNew = new VaultService(store, new Keyring(k2));
      expect((await onlyNew.getVariable(t, 'var_2'))?.value).toBe('newest-stale');
    });

    it('concurrent setVariable calls during rotation: the newest value of each key wins', async () => {
      const { store } = await fresh();
      const k1 = key();
      const k2 = key();
      const seeded = await seed(new VaultService(store, new Keyring(k1)), store, 30, 0);
      const t = seeded.tenants[0] ?? '';
      const vault = new VaultService(store, new Keyring(k2, [k1]));
      const stale = new VaultService(store, new Keyring(k1));
      const latest = new Map<string, string>();
      const writer = async () => {
        for (let i = 0; i < 60; i++) {
          // seed() puts var_<even> in tenant t.
          const keyName = `var_${((i * 7) % 15) * 2}`;
          const value = `w${i}`;
          await (i % 3 === 0 ? stale : vault).setVariable(
            t,
            keyName,
            value,
            { secret: true },
            T0 + i,
          );
          latest.set(keyName, value);
        }
      };
      const [rotated] = await Promise.all([vault.rotateKeys({ batchSize: 2 }), writer()]);
      expect(rotated.resealed).toBeGreaterThan(0);
      // The stale writer may have sealed its last writes under k1 after rotation passed them.
      await vault.rotateKeys({ batchSize: 10 });
      expect(await vault.remainingUnderOldKeys()).toBe(0);
      for (const [k, v] of latest) expect((await vault.getVariable(t, k))?.value, k).toBe(v);
      for (const [path, v] of seeded.vars) {
        const [tt, k] = path.split('/') as [string, string];
        if (tt === t && latest.has(k)) continue;
        expect((await vault.getVariable(tt, k))?.value, path).toBe(v);
      }
    });

    it('stops on a value whose key is not in the keyring, changing nothing, and says which key', async () => {
      const { store } = await fresh();
      const k1 = key();
      const seeded = await seed(new VaultService(store, new Keyring(k1)), store, 3, 1);
      const before = await store.countSealedByKeyId();
      const k2 = key();
      const err = await rejection(
        new VaultService(store, new Keyring(k2)).rotateKeys({ batchSize: 10 }),
      );
      expect(err.code).toBe('LF_SECRET_KEY_MISSING');
      expect(err.message).toContain(k1.id);
      expect(await store.countSealedByKeyId()).toEqual(before);
      await expectAllReadable(new VaultService(store, new Keyring(k1)), seeded);
      const usage = await new VaultService(store, new Keyring(k2)).keyUsage();
      expect(usage).toContainEqual({ key_id: k1.id, sealed: 4, in_keyring: false, current: false });
    });

    it('stops on a tampered value without touching it', async () => {
      const { store } = await fresh();
      const k1 = key();
      const vault1 = new VaultService(store, new Keyring(k1));
      const t = await tenant(store);
      await vault1.setVariable(t, 'good', 'g', { secret: true }, T0);
      await vault1.setVariable(t, 'bad', 'b', { secret: true }, T0);
      const bad = await store.getVariable(t, 'bad');
      if (bad?.value_cipher == null) throw new Error('missing');
      const tampered = Uint8Array.from(bad.value_cipher);
      tampered[20] = (tampered[20] ?? 0) ^ 1;
      await store.putVariable({ ...bad, value_cipher: tampered });
      const err = await rejection(
        new VaultService(store, new Keyring(key(), [k1])).rotateKeys({ batchSize: 10 }),
      );
      expect(err.code).toBe('LF_SECRET_DECRYPT_FAILED');
      expect((await store.getVariable(t, 'bad'))?.value_cipher).toEqual(tampered);
    });

    it('rejects a batch size below 1', async () => {
      const { store } = await fresh();
      const vault = new VaultService(store, new Keyring(key()));
      for (const batchSize of [0, -1, Number.NaN]) {
        expect((await rejection(vault.rotateKeys({ batchSize }))).code).toBe('LF_INVALID_ARGUMENT');
      }
    });
  });

  describe('canary', () => {
    it('a planted secret never appears in the database bytes nor in any error message', async () => {
      const db = await fresh();
      const { store } = db;
      const canary = `CANARY-${randomBytes(12).toString('hex')}`;
      const plainMark = `PLAINMARK-${randomBytes(12).toString('hex')}`;
      const k1 = key();
      const k2 = key();
      const vault = new VaultService(store, new Keyring(k1));
      const t = await tenant(store);
      await vault.setVariable(t, 'canary_var', canary, { secret: true }, T0);
      await vault.setConnection(t, 'canary_conn', pg(canary, { token: canary }), '', T0);
      await vault.setConnection(t, 'canary_extra', pg(null, { nested: { deep: canary } }), '', T0);
      await vault.setVariable(t, 'canary_var', `${canary}-v2`, { secret: true }, T0 + 1);
      // Positive control: a plain value is found by the same scan.
      await vault.setVariable(t, 'plain', plainMark, { secret: false }, T0);
      await new VaultService(store, new Keyring(k2, [k1])).rotateKeys({ batchSize: 1 });

      const errors: string[] = [];
      const collect = async (p: Promise<unknown>) => {
        try {
          await p;
        } catch (err) {
          errors.push(`${String(err)} ${inspect(err)} ${JSON.stringify(err)}`);
        }
      };
      const rotated = new VaultService(store, new Keyring(k2));
      const wrongKey = new VaultService(store, new Keyring(key()));
      await collect(wrongKey.getVariable(t, 'canary_var'));
      await collect(wrongKey.getConnection(t, 'canary_conn'));
      await collect(wrongKey.rotateKeys({ batchSize: 5 }));
      const row = await store.getVariable(t, 'canary_var');
      const conn = await store.getConnection(t, 'canary_conn');
      if (row === undefined || conn === undefined) throw new Error('missing');
      await store.putVariable({ ...row, key: 'moved', value_cipher: conn.secret_cipher });
      await collect(rotated.getVariable(t, 'moved'));
      await collect(rotated.rotateKeys({ batchSize: 5 }));
      await collect(Promise.resolve().then(() => parseSecretKey(canary, 'LEOFLOW_SECRET_KEY')));
      expect(errors.length).toBeGreaterThanOrEqual(5);
      for (const e of errors) {
        expect(e).not.toContain(canary);
        for (const k of [k1, k2]) {
          expect(e).not.toContain(k.key.toString('hex'));
          expect(e).not.toContain(k.key.toString('base64'));
        }
      }
      // The values are all still there for the right keyring.
      expect((await rotated.getVariable(t, 'canary_var'))?.value).toBe(`${canary}-v2`);
      expect((await rotated.getConnection(t, 'canary_extra'))?.conn.extra).toEqual({
        nested: { deep: canary },
      });

      const bytes = await db.dump();
      expect(bytes.includes(plainMark)).toBe(true);
      for (const form of [
        canary,
        Buffer.from(canary).toString('hex'),
        Buffer.from(canary).toString('base64').slice(0, 24),
        Buffer.from(canary, 'utf16le').toString('latin1'),
      ]) {
        expect(bytes.includes(form), form).toBe(false);
      }
      for (const k of [k1, k2]) {
        expect(bytes.includes(k.key)).toBe(false);
        expect(bytes.includes(k.key.toString('hex'))).toBe(false);
        expect(bytes.includes(k.key.toString('base64'))).toBe(false);
      }
    });
  });
}

/** Records which read methods delivery uses, passing everything through. */
function spyStore(store: Store, calls: string[]): Store {
  const watched = new Set([
    'getVariablesByKeys',
    'getAllVariables',
    'getConnectionsByIds',
    'getAllConnections',
    'getVariable',
    'getConnection',
    'listVariables',
    'listConnections',
  ]);
  return new Proxy(store, {
    get(target, prop, receiver) {
      const v: unknown = Reflect.get(target, prop, receiver);
      if (typeof v !== 'function') return v;
      const fn = (v as (...a: unknown[]) => unknown).bind(target);
      if (typeof prop === 'string' && watched.has(prop)) {
        return (...args: unknown[]) => {
          calls.push(prop);
          return fn(...args);
        };
      }
      return fn;
    },
  });
}
