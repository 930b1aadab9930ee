import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isLeoflowError, type LeoflowError } from '@leoflow/core';
import { afterAll, describe, expect, it } from 'vitest';
import { vaultAad } from '../../src/vault/keyring.js';
import {
  addKeyToKeyringFile,
  liteKeyringPath,
  loadKeyring,
  removeKeysFromKeyringFile,
} from '../../src/vault/load-keyring.js';
import { secretKeyId } from '../../src/vault/secret-key.js';

const root = mkdtempSync(join(tmpdir(), 'leoflow-keyring-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let n = 0;
function freshDir(): string {
  n += 1;
  return join(root, `d${n}`);
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

function writeKeyring(file: string, json: unknown, mode = 0o600): void {
  writeFileSync(file, JSON.stringify(json), { mode });
  chmodSync(file, mode);
}

describe('Lite key', () => {
  it('is generated on first start (file 0600, dir 0700) and reused afterwards', async () => {
    const dataDir = freshDir();
    const first = await loadKeyring({ edition: 'lite', dataDir, env: {} });
    const file = liteKeyringPath(dataDir);
    expect(first).toMatchObject({ source: 'lite-keyring-file', file, created: true });
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(join(dataDir, 'keys')).mode & 0o777).toBe(0o700);
    // Only the keyring is left behind: no temp files.
    expect(readdirSync(join(dataDir, 'keys'))).toEqual(['keyring.json']);

    const json = JSON.parse(readFileSync(file, 'utf8')) as {
      current: string;
      keys: Record<string, string>;
    };
    expect(json.current).toBe(first.keyring.currentKeyId);
    expect(Object.keys(json.keys)).toEqual([json.current]);

    const aad = vaultAad('variable', 't', 'k');
    const sealed = first.keyring.seal(Buffer.from('persisted'), aad);
    const second = await loadKeyring({ edition: 'lite', dataDir, env: {} });
    expect(second.created).toBe(false);
    expect(second.keyring.currentKeyId).toBe(first.keyring.currentKeyId);
    expect(Buffer.from(second.keyring.open(sealed.cipher, sealed.key_id, aad)).toString()).toBe(
      'persisted',
    );
  });

  it('is random per install: there is no built-in key', async () => {
    const a = await loadKeyring({ edition: 'lite', dataDir: freshDir(), env: {} });
    const b = await loadKeyring({ edition: 'lite', dataDir: freshDir(), env: {} });
    expect(a.keyring.currentKeyId).not.toBe(b.keyring.currentKeyId);
  });

  it('concurrent first starts agree on one key', async () => {
    const dataDir = freshDir();
    const loaded = await Promise.all(
      Array.from({ length: 8 }, () => loadKeyring({ edition: 'lite', dataDir, env: {} })),
    );
    expect(new Set(loaded.map((l) => l.keyring.currentKeyId)).size).toBe(1);
    expect(loaded.filter((l) => l.created)).toHaveLength(1);
    expect(readdirSync(join(dataDir, 'keys'))).toEqual(['keyring.json']);
  });

  it('refuses a Lite keyring that group or others can read', async () => {
    const dataDir = freshDir();
    await loadKeyring({ edition: 'lite', dataDir, env: {} });
    chmodSync(liteKeyringPath(dataDir), 0o644);
    const err = await rejection(loadKeyring({ edition: 'lite', dataDir, env: {} }));
    expect(err.code).toBe('LF_SECRET_KEYRING_PERMISSIONS');
    expect(err.message).toContain('chmod 600');
  });

  it('honours LEOFLOW_SECRET_KEY and keeps the generated key as an older key', async () => {
    const dataDir = freshDir();
    const lite = await loadKeyring({ edition: 'lite', dataDir, env: {} });
    const aad = vaultAad('variable', 't', 'k');
    const before = lite.keyring.seal(Buffer.from('before'), aad);

    const key = randomBytes(32);
    const env = { LEOFLOW_SECRET_KEY: key.toString('base64') };
    const withEnv = await loadKeyring({ edition: 'lite', dataDir, env });
    expect(withEnv).toMatchObject({ source: 'env', file: undefined, created: false });
    expect(withEnv.keyring.currentKeyId).toBe(secretKeyId(key));
    expect(withEnv.keyring.keyIds()).toEqual([secretKeyId(key), lite.keyring.currentKeyId]);
    expect(Buffer.from(withEnv.keyring.open(before.cipher, before.key_id, aad)).toString()).toBe(
      'before',
    );
  });

  it('with LEOFLOW_SECRET_KEY on a fresh data dir creates no key file', async () => {
    const dataDir = freshDir();
    const key = randomBytes(32);
    const loaded = await loadKeyring({
      edition: 'lite',
      dataDir,
      env: { LEOFLOW_SECRET_KEY: key.toString('hex') },
    });
    expect(loaded.keyring.keyIds()).toEqual([secretKeyId(key)]);
    expect(() => statSync(liteKeyringPath(dataDir))).toThrow();
  });
});

describe('Pro key', () => {
  it('refuses to boot without a key, naming both settings', async () => {
    const err = await rejection(loadKeyring({ edition: 'pro', dataDir: freshDir(), env: {} }));
    expect(err.code).toBe('LF_SECRET_KEY_REQUIRED');
    expect(err.message).toContain('LEOFLOW_SECRET_KEY');
    expect(err.message).toContain('LEOFLOW_SECRET_KEYRING_FILE');
    expect(err.message).toMatch(/no built-in key/i);
  });

  it('never falls back to a generated key, even when a Lite keyring exists', async () => {
    const dataDir = freshDir();
    await loadKeyring({ edition: 'lite', dataDir, env: {} });
    const err = await rejection(loadKeyring({ edition: 'pro', dataDir, env: {} }));
    expect(err.code).toBe('LF_SECRET_KEY_REQUIRED');
  });

  it('accepts LEOFLOW_SECRET_KEY in every encoding, with older keys from LEOFLOW_SECRET_KEY_PREVIOUS', async () => {
    const key = randomBytes(32);
    const old1 = randomBytes(32);
    const old2 = randomBytes(32);
    for (const encoded of [
      key.toString('hex'),
      key.toString('base64'),
      key.toString('base64url'),
    ]) {
      const loaded = await loadKeyring({
        edition: 'pro',
        dataDir: freshDir(),
        env: {
          LEOFLOW_SECRET_KEY: encoded,
          LEOFLOW_SECRET_KEY_PREVIOUS: ` ${old1.toString('hex')}, ${old2.toString('base64')} `,
        },
      });
      expect(loaded.source).toBe('env');
      expect(loaded.keyring.keyIds()).toEqual([
        secretKeyId(key),
        secretKeyId(old1),
        secretKeyId(old2),
      ]);
    }
  });

  it('an invalid LEOFLOW_SECRET_KEY is a clear error that names it and does not echo it', async () => {
    const bad = randomBytes(31).toString('hex');
    const err = await rejection(
      loadKeyring({ edition: 'pro', dataDir: freshDir(), env: { LEOFLOW_SECRET_KEY: bad } }),
    );
    expect(err.code).toBe('LF_SECRET_KEY_INVALID');
    expect(err.message).toContain('LEOFLOW_SECRET_KEY');
    expect(err.message).not.toContain(bad);
    expect(err.message).not.toContain(bad.slice(0, 12));

    const empty = await rejection(
      loadKeyring({ edition: 'pro', dataDir: freshDir(), env: { LEOFLOW_SECRET_KEY: '' } }),
    );
    expect(empty.code).toBe('LF_SECRET_KEY_INVALID');

    const prev = await rejection(
      loadKeyring({
        edition: 'pro',
        dataDir: freshDir(),
        env: {
          LEOFLOW_SECRET_KEY: randomBytes(32).toString('hex'),
          LEOFLOW_SECRET_KEY_PREVIOUS: bad,
        },
      }),
    );
    expect(prev.message).toContain('LEOFLOW_SECRET_KEY_PREVIOUS');
    expect(prev.message).not.toContain(bad);
  });

  it('refuses a key and a keyring file at once, and PREVIOUS without a current key', async () => {
    const dir = freshDir();
    const file = join(root, `both-${n}.json`);
    await addKeyToKeyringFile(file);
    const both = await rejection(
      loadKeyring({
        edition: 'pro',
        dataDir: dir,
        env: {
          LEOFLOW_SECRET_KEY: randomBytes(32).toString('hex'),
          LEOFLOW_SECRET_KEYRING_FILE: file,
        },
      }),
    );
    expect(both.code).toBe('LF_SECRET_KEY_CONFLICT');
    const orphan = await rejection(
      loadKeyring({
        edition: 'pro',
        dataDir: dir,
        env: { LEOFLOW_SECRET_KEY_PREVIOUS: randomBytes(32).toString('hex') },
      }),
    );
    expect(orphan.code).toBe('LF_SECRET_KEY_CONFLICT');
  });
});

describe('keyring files', () => {
  it('loads a keyring file (env or explicit path) with its current and older keys', async () => {
    const dir = freshDir();
    const file = join(root, `ring-${n}.json`);
    const cur = randomBytes(32);
    const old = randomBytes(32);
    writeKeyring(file, {
      current: '2026-08',
      keys: { '2026-01': old.toString('base64url'), '2026-08': cur.toString('hex') },
    });
    chmodSync(file, 0o400);
    for (const opts of [
      { env: { LEOFLOW_SECRET_KEYRING_FILE: file } },
      { env: {}, keyringFile: file },
    ]) {
      const loaded = await loadKeyring({ edition: 'pro', dataDir: dir, ...opts });
      expect(loaded).toMatchObject({ source: 'keyring-file', file, created: false });
      expect(loaded.keyring.currentKeyId).toBe('2026-08');
      expect(loaded.keyring.keyIds()).toEqual(['2026-08', '2026-01']);
    }
  });

  it('refuses a keyring file readable or writable by group or others', async () => {
    const file = join(root, `loose-${n}.json`);
    const key = randomBytes(32);
    writeKeyring(file, { current: 'a', keys: { a: key.toString('base64') } }, 0o640);
    for (const mode of [0o640, 0o604, 0o620, 0o666]) {
      chmodSync(file, mode);
      const err = await rejection(
        loadKeyring({ edition: 'pro', dataDir: freshDir(), env: {}, keyringFile: file }),
      );
      expect(err.code).toBe('LF_SECRET_KEYRING_PERMISSIONS');
      expect(err.message).toContain(file);
      expect(err.message).not.toContain(key.toString('base64'));
    }
  });

  it('reports malformed keyring files without echoing key material', async () => {
    const key = randomBytes(32).toString('base64');
    const cases: [unknown, RegExp][] = [
      [{ current: 'a', keys: { b: key } }, /not in "keys"/],
      [{ keys: { a: key } }, /"current"/],
      [{ current: 'a', keys: [key] }, /"keys"/],
      [{ current: 'a', keys: { a: key.slice(0, 20) } }, /not a valid secret key/],
      [{ current: 'bad id', keys: { 'bad id': key } }, /key id/],
      [[key], /JSON object/],
    ];
    for (const [json, why] of cases) {
      const file = join(root, `bad-${n}-${Math.random()}.json`);
      writeKeyring(file, json);
      const err = await rejection(
        loadKeyring({ edition: 'pro', dataDir: freshDir(), env: {}, keyringFile: file }),
      );
      expect(err.message).toMatch(why);
      expect(err.message).not.toContain(key);
      expect(err.message).not.toContain(key.slice(0, 20));
    }
    const file = join(root, `notjson-${n}.json`);
    writeFileSync(file, `{"current": "a", "keys": {"a": "${key}"`, { mode: 0o600 });
    const err = await rejection(
      loadKeyring({ edition: 'pro', dataDir: freshDir(), env: {}, keyringFile: file }),
    );
    expect(err.code).toBe('LF_SECRET_KEYRING_INVALID');
    expect(err.message).not.toContain(key.slice(0, 10));
  });

  it('addKeyToKeyringFile makes a new key current and keeps every old one', async () => {
    const dataDir = freshDir();
    const lite = await loadKeyring({ edition: 'lite', dataDir, env: {} });
    const file = liteKeyringPath(dataDir);
    const aad = vaultAad('connection', 't', 'c');
    const sealed = lite.keyring.seal(Buffer.from('under the first key'), aad);

    const given = randomBytes(32);
    const added = await addKeyToKeyringFile(file, given.toString('base64url'));
    expect(added).toEqual({ id: secretKeyId(given), file });
    const generated = await addKeyToKeyringFile(file);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readdirSync(join(dataDir, 'keys'))).toEqual(['keyring.json']);

    const reloaded = await loadKeyring({ edition: 'lite', dataDir, env: {} });
    expect(reloaded.keyring.currentKeyId).toBe(generated.id);
    expect(new Set(reloaded.keyring.keyIds())).toEqual(
      new Set([lite.keyring.currentKeyId, added.id, generated.id]),
    );
    expect(Buffer.from(reloaded.keyring.open(sealed.cipher, sealed.key_id, aad)).toString()).toBe(
      'under the first key',
    );

    // Re-adding a key it already holds just makes it current again.
    await addKeyToKeyringFile(file, given);
    expect((await loadKeyring({ edition: 'lite', dataDir, env: {} })).keyring.currentKeyId).toBe(
      added.id,
    );

    // Old keys go only on request, and never the current one.
    await expect(removeKeysFromKeyringFile(file, [added.id])).rejects.toThrow(/current key/);
    expect(await removeKeysFromKeyringFile(file, [lite.keyring.currentKeyId, 'k-none'])).toEqual([
      lite.keyring.currentKeyId,
    ]);
    expect(
      (await loadKeyring({ edition: 'lite', dataDir, env: {} })).keyring.keyIds().sort(),
    ).toEqual([added.id, generated.id].sort());
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });

  it('addKeyToKeyringFile creates a Pro keyring file and refuses a loose one', async () => {
    const dir = join(freshDir(), 'secrets');
    const file = join(dir, 'keyring.json');
    const { id } = await addKeyToKeyringFile(file);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const loaded = await loadKeyring({
      edition: 'pro',
      dataDir: freshDir(),
      env: {},
      keyringFile: file,
    });
    expect(loaded.keyring.currentKeyId).toBe(id);
    chmodSync(file, 0o644);
    expect((await rejection(addKeyToKeyringFile(file))).code).toBe('LF_SECRET_KEYRING_PERMISSIONS');
    expect((await rejection(addKeyToKeyringFile(join(dir, 'x.json'), 'short'))).code).toBe(
      'LF_SECRET_KEY_INVALID',
    );
  });
});
