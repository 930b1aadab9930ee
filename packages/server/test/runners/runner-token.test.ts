import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  isRunnerTokenShape,
  mintRunnerToken,
  redactRunnerPath,
  runnerTokenHash,
} from '../../src/runners/runner-token.js';
import { isPinnedHostKey } from '../../src/runners/runner-validation.js';
import { runnerView } from '../../src/runners/runner-registry.js';
import { loadKeyring, VaultService } from '../../src/vault/index.js';
import type { VaultServiceStore } from '../../src/vault/vault-service.js';

describe('runner tokens', () => {
  it('1,000 minted tokens are distinct, lfr_ + 43 base64url characters (256 bits)', () => {
    const tokens = Array.from({ length: 1000 }, mintRunnerToken);
    expect(new Set(tokens).size).toBe(1000);
    for (const t of tokens) {
      expect(t).toMatch(/^lfr_[A-Za-z0-9_-]{43}$/);
      expect(Buffer.from(t.slice(4), 'base64url').length).toBe(32);
      expect(isRunnerTokenShape(t)).toBe(true);
    }
    expect(isRunnerTokenShape(`${tokens[0]!}x`)).toBe(false);
  });

  it('hashes by SHA-256 of the whole token; a one-character change is another hash', () => {
    const t = mintRunnerToken();
    expect(runnerTokenHash(t)).toMatch(/^[0-9a-f]{64}$/);
    expect(runnerTokenHash(t)).toBe(runnerTokenHash(t));
    const near = t.slice(0, -1) + (t.endsWith('A') ? 'B' : 'A');
    expect(runnerTokenHash(near)).not.toBe(runnerTokenHash(t));
  });

  it('redacts the token segment of any door path, and leaves other paths alone', () => {
    const t = mintRunnerToken();
    expect(redactRunnerPath(`/runners/${t}/session`)).toBe('/runners/<redacted>/session');
    expect(redactRunnerPath(`/runners/${t}`)).toBe('/runners/<redacted>');
    expect(redactRunnerPath(`/runners/${t}?x=1`)).toBe('/runners/<redacted>?x=1');
    expect(redactRunnerPath('/other')).toBe('/other');
  });

  it('pins host keys: known_hosts lines and SHA256 fingerprints, nothing else', () => {
    expect(
      isPinnedHostKey(
        'box ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl',
      ),
    ).toBe(true);
    expect(
      isPinnedHostKey(
        'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl',
      ),
    ).toBe(true);
    expect(isPinnedHostKey('SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8')).toBe(true);
    expect(isPinnedHostKey('SHA256:short')).toBe(false);
    expect(isPinnedHostKey('box ssh-dss AAAAB3NzaC1kc3MAAACBAP')).toBe(false);
    expect(isPinnedHostKey('accept-new')).toBe(false);
    expect(isPinnedHostKey('')).toBe(false);
  });
});

describe('runner tokens in the vault', () => {
  it('opens only on the row it was sealed for (tenant and runner id in the AAD)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'leoflow-rt-'));
    try {
      const { keyring } = await loadKeyring({ edition: 'lite', dataDir: dir, env: {} });
      const vault = new VaultService({} as VaultServiceStore, keyring);
      const token = mintRunnerToken();
      const sealed = vault.sealRunnerToken('team-a', 'rnr_1', token);
      expect(Buffer.from(sealed.cipher).toString('latin1')).not.toContain(token);
      expect(vault.openRunnerToken('team-a', 'rnr_1', sealed.cipher, sealed.key_id)).toBe(token);
      expect(() => vault.openRunnerToken('team-a', 'rnr_2', sealed.cipher, sealed.key_id)).toThrow(
        expect.objectContaining({ code: 'LF_SECRET_DECRYPT_FAILED' }),
      );
      expect(() => vault.openRunnerToken('team-b', 'rnr_1', sealed.cipher, sealed.key_id)).toThrow(
        expect.objectContaining({ code: 'LF_SECRET_DECRYPT_FAILED' }),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('runnerView (the one redaction point)', () => {
  it('carries every field a reader may see and nothing of the token', () => {
    const token = mintRunnerToken();
    const view = runnerView({
      id: 'rnr_1',
      tenant_id: 'team-a',
      name: 'lin-1',
      kind: 'inbound',
      labels: { a: 'b' },
      capacity: 1,
      ssh: null,
      token_hash: runnerTokenHash(token),
      token_cipher: new Uint8Array([1, 2]),
      token_key_id: 'k1',
      created_by: 'u',
      created_at: 1,
    });
    expect(Object.keys(view).sort()).toEqual(
      [
        'capacity',
        'created_at',
        'created_by',
        'has_token',
        'id',
        'kind',
        'labels',
        'name',
        'ssh',
      ].sort(),
    );
    expect(JSON.stringify(view)).not.toContain(runnerTokenHash(token));
    expect(view.has_token).toBe(true);
  });
});
