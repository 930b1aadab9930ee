import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock, type LeoflowError } from '@leoflow/core';
import { decodeProtectedHeader } from 'jose';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { AgentTokenIssuer } from '../../src/auth/agent-token.js';
import { keyRetentionSeconds, loadSigningKeyring } from '../../src/auth/signing-keys.js';
import { reloadSigningKeyringOnChange, VaultKeyringReloader } from '../../src/vault/key-reload.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/store.js';
import {
  addKeyToKeyringFile,
  loadKeyring,
  removeKeysFromKeyringFile,
} from '../../src/vault/index.js';
import { liteKeyringPath } from '../../src/vault/load-keyring.js';
import { VaultService } from '../../src/vault/vault-service.js';
import { identity, MIN, T0 } from '../auth/fixtures.js';
import { postgresTestUrl, useFreshPostgresSchema } from '../support/databases.js';
import { forEachDialect } from '../support/dialects.js';

const root = mkdtempSync(join(tmpdir(), 'leoflow-replica-keys-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const freshDir = () => {
  n += 1;
  return join(root, `d${n}`);
};

/** One replica's vault: its own keyring loaded from the shared keyring file, the shared store. */
async function replica(store: Store, dataDir: string, clock: ManualClock) {
  const load = async () =>
    (
      await loadKeyring({
        edition: 'lite',
        dataDir,
        env: {},
      })
    ).keyring;
  const errors: LeoflowError[] = [];
  let reloader: VaultKeyringReloader | undefined;
  const vault = new VaultService(store, await load(), {
    clock,
    onUnknownKey: async (ids) => {
      await reloader?.onUnknownKey(ids);
    },
  });
  reloader = new VaultKeyringReloader({ vault, load, clock, onError: (e) => errors.push(e) });
  return { vault, reloader, errors, load };
}

forEachDialect('vault-key rotation across replicas', (dialect) => {
  const schema = dialect === 'postgres' ? useFreshPostgresSchema('replica_keys') : undefined;
  let store: Store | undefined;
  afterEach(async () => {
    await store?.close();
    store = undefined;
  });

  async function setup() {
    const dataDir = freshDir();
    store =
      dialect === 'sqlite'
        ? await openStore({ kind: 'sqlite', file: join(dataDir, 'leoflow.db') })
        : await openStore({
            kind: 'postgres',
            url: postgresTestUrl(),
            schema: `${schema?.()}_${n}`,
          });
    await store.migrate();
    await store.ensureTenant('t', 'T', T0);
    const clock = new ManualClock(T0);
    // Both replicas start on the same keyring file (created by the first load).
    const a = await replica(store, dataDir, clock);
    const b = await replica(store, dataDir, clock);
    return { dataDir, file: liteKeyringPath(dataDir), clock, a, b };
  }

  it('a value re-sealed by another replica under a new key opens here after one reload', async () => {
    const { file, a, b } = await setup();
    const oldKey = a.vault.currentKeyId;
    await a.vault.setVariable('t', 'db_pass', 's3cret', { secret: true }, T0);

    // Replica A rotates: new current key in the shared file, every value re-sealed under it.
    await addKeyToKeyringFile(file);
    a.vault.replaceKeyring(await a.load());
    expect(await a.vault.rotateKeys({ batchSize: 10 })).toEqual({ resealed: 1 });
    expect(a.vault.currentKeyId).not.toBe(oldKey);

    // Replica B has not reloaded: the miss on the unknown key id triggers the reload, then opens.
    expect(b.vault.currentKeyId).toBe(oldKey);
    expect((await b.vault.getVariable('t', 'db_pass'))?.value).toBe('s3cret');
    expect(b.vault.currentKeyId).toBe(a.vault.currentKeyId);
    expect(b.errors).toEqual([]);
  });

  it('without the reload a replica refuses the value (it never guesses), naming the key id', async () => {
    const { file, a } = await setup();
    await a.vault.setVariable('t', 'db_pass', 's3cret', { secret: true }, T0);
    const stale = new VaultService(store!, await a.load()); // no onUnknownKey
    await addKeyToKeyringFile(file);
    a.vault.replaceKeyring(await a.load());
    await a.vault.rotateKeys({ batchSize: 10 });
    await expect(stale.getVariable('t', 'db_pass')).rejects.toMatchObject({
      code: 'LF_SECRET_KEY_MISSING',
      details: { key_id: a.vault.currentKeyId },
    });
  });

  it('during the overlap values sealed under the old key keep opening on every replica', async () => {
    const { file, a, b } = await setup();
    const oldKey = b.vault.currentKeyId;
    await addKeyToKeyringFile(file);
    a.vault.replaceKeyring(await a.load());
    // B still seals under the old key; A (new key current, old key kept) opens it.
    await b.vault.setVariable('t', 'from_b', 'old-key value', { secret: true }, T0);
    expect((await a.vault.keyUsage()).find((u) => u.key_id === oldKey)?.sealed).toBe(1);
    expect((await a.vault.getVariable('t', 'from_b'))?.value).toBe('old-key value');
    // And A's new-key values open on B once B reloads.
    await a.vault.setVariable('t', 'from_a', 'new-key value', { secret: true }, T0);
    expect((await b.vault.getVariable('t', 'from_a'))?.value).toBe('new-key value');
  });

  it('a reload that would drop a key still sealing values is refused; once re-sealed it applies', async () => {
    const { file, a, b } = await setup();
    const oldKey = b.vault.currentKeyId;
    await b.vault.setVariable('t', 'v', 'value', { secret: true }, T0);
    await addKeyToKeyringFile(file);
    expect(await b.reloader.reloadNow()).toBe('applied');
    // The operator removes the old key too early: one value is still sealed under it.
    await removeKeysFromKeyringFile(file, [oldKey]);
    expect(await b.reloader.reloadNow()).toBe('refused');
    expect(b.errors.map((e) => e.code)).toEqual(['LF_SECRET_KEYRING_INVALID']);
    expect(b.errors[0]?.message).toContain(`key ${oldKey} (still sealing 1 value(s))`);
    expect(b.vault.keyIds).toContain(oldKey);
    expect((await b.vault.getVariable('t', 'v'))?.value).toBe('value');

    // Re-seal under the current key (rotate-key --resume), then the removal is adopted.
    expect(await b.vault.rotateKeys({ batchSize: 10 })).toEqual({ resealed: 1 });
    expect(await b.reloader.reloadNow()).toBe('applied');
    expect(b.vault.keyIds).not.toContain(oldKey);
    expect((await b.vault.getVariable('t', 'v'))?.value).toBe('value');
    void a;
  });

  it('reloads on an unknown key id are rate-limited on the injected clock', async () => {
    const { b, clock } = await setup();
    expect(await b.reloader.onUnknownKey(['nope'])).toBe('unchanged');
    expect(await b.reloader.onUnknownKey(['nope'])).toBe('throttled');
    clock.advance(4_999);
    expect(await b.reloader.onUnknownKey(['nope'])).toBe('throttled');
    clock.advance(1);
    expect(await b.reloader.onUnknownKey(['nope'])).toBe('unchanged');
  });

  it('a change of the keyring file reaches a watching replica without any read', async () => {
    const { file, b } = await setup();
    const applied = new Promise<string>((resolve) => {
      const watching = new VaultKeyringReloader({
        vault: b.vault,
        load: b.load,
        clock: new ManualClock(T0),
        onError: () => undefined,
        onApplied: (c) => resolve(c.current_key_id),
      });
      watching.watch(file, 20);
      afterEach(() => watching.stop());
    });
    await addKeyToKeyringFile(file);
    const current = await applied; // the watch fired (no sleep)
    expect(b.vault.currentKeyId).toBe(current);
  });
});

describe('signing-key rotation across replicas (one shared keys directory)', () => {
  const TTL = 600;
  const RETAIN = keyRetentionSeconds(TTL, 5);

  it('a replica picks up another replica’s rotation and signs with the new key; old tokens verify until retention ends', async () => {
    const dir = freshDir();
    const a = await loadSigningKeyring(dir, 'agent', { nowMs: T0, retainSeconds: RETAIN });
    const b = await loadSigningKeyring(dir, 'agent', { nowMs: T0, retainSeconds: RETAIN });
    const issuerA = new AgentTokenIssuer(a, TTL);
    const issuerB = new AgentTokenIssuer(b, TTL);
    const oldKid = b.current().kid;
    const newKid = new Promise<string>((resolve, reject) => {
      const w = reloadSigningKeyringOnChange(b, {
        onError: reject,
        onApplied: resolve,
        debounceMs: 20,
      });
      afterEach(() => w.close());
    });

    // B signed before the rotation; A rotates at T0 + 1 min.
    const bOld = await issuerB.mint(identity, T0);
    const rotated = await a.rotate(T0 + MIN);
    expect(await newKid).toBe(rotated); // B reloaded on the directory change, no sleep
    expect(b.current().kid).toBe(rotated);
    const bNew = await issuerB.mint(identity, T0 + 2 * MIN);
    expect(decodeProtectedHeader(bNew).kid).toBe(rotated);

    // Live: A verifies B's old-key token during the overlap, B verifies A's new-key token.
    await expect(issuerA.verify(bOld, T0 + 2 * MIN)).resolves.toMatchObject({ task_id: 'extract' });
    const aNew = await issuerA.mint(identity, T0 + 2 * MIN);
    await expect(issuerB.verify(aNew, T0 + 3 * MIN)).resolves.toMatchObject({ task_id: 'extract' });

    // Dead: past the retired key's retention its tokens are refused on both replicas.
    const afterRetention = T0 + MIN + RETAIN * 1000 + 1;
    expect(a.verificationKey(oldKid, afterRetention)).toBeUndefined();
    expect(b.verificationKey(oldKid, afterRetention)).toBeUndefined();
    await expect(issuerA.verifyIgnoringExpiry(bOld, afterRetention)).rejects.toMatchObject({
      reason: 'invalid',
    });
    await expect(issuerB.verifyIgnoringExpiry(bOld, afterRetention)).rejects.toMatchObject({
      reason: 'invalid',
    });
  });
});
