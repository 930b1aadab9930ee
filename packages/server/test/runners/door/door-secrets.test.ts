import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock } from '@leoflow/core';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSigningKeyring, type FileSigningKeyring } from '../../../src/auth/signing-keys.js';
import {
  CONNECTION_SECRET_TTL_MS,
  ConnectionSecrets,
} from '../../../src/runners/cells/connection-secrets.js';
import {
  DoorCredentialIssuer,
  DoorCredentialVerifier,
} from '../../../src/runners/door-credential.js';
import { T0 } from '../../support/harness.js';

describe('per-connection secrets (cell side)', () => {
  const grant = { runner_id: 'rnr_1', tenant_id: 'team-a' };

  it('a secret is good once, for its runner, until just before 30 s', () => {
    const clock = new ManualClock(T0);
    const secrets = new ConnectionSecrets(clock);
    const a = secrets.mint(grant);
    expect(a.expires_at - T0).toBe(CONNECTION_SECRET_TTL_MS);
    expect(CONNECTION_SECRET_TTL_MS).toBeLessThanOrEqual(30_000);
    clock.advance(CONNECTION_SECRET_TTL_MS - 1);
    expect(secrets.consume(a.secret)).toEqual(grant);
    // single use
    expect(secrets.consume(a.secret)).toBeUndefined();
  });

  it('an expired or unknown secret is refused, and a refused one is gone', () => {
    const clock = new ManualClock(T0);
    const secrets = new ConnectionSecrets(clock);
    const a = secrets.mint(grant);
    const b = secrets.mint({ runner_id: 'rnr_2', tenant_id: 'team-a' });
    expect(a.secret).not.toBe(b.secret);
    clock.advance(CONNECTION_SECRET_TTL_MS);
    expect(secrets.consume(a.secret)).toBeUndefined();
    expect(secrets.consume('x')).toBeUndefined();
    expect(secrets.consume(b.secret.slice(0, -1))).toBeUndefined();
    // minting sweeps the expired ones
    secrets.mint(grant);
    expect(secrets.outstanding).toBe(1);
  });

  it('each secret names its own runner', () => {
    const secrets = new ConnectionSecrets(new ManualClock(T0));
    const a = secrets.mint(grant);
    const b = secrets.mint({ runner_id: 'rnr_2', tenant_id: 'team-b' });
    expect(secrets.consume(b.secret)).toEqual({ runner_id: 'rnr_2', tenant_id: 'team-b' });
    expect(secrets.consume(a.secret)).toEqual(grant);
  });
});

describe("the door's credential towards cells", () => {
  let dir: string;
  let door: FileSigningKeyring;
  let stranger: FileSigningKeyring;
  let agentKeys: FileSigningKeyring;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'leoflow-doorcred-'));
    door = await loadSigningKeyring(join(dir, 'door'), 'door');
    stranger = await loadSigningKeyring(join(dir, 'stranger'), 'door');
    agentKeys = await loadSigningKeyring(join(dir, 'agent'), 'agent');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('verifies a fresh credential of a trusted door key, with its runner id', async () => {
    const clock = new ManualClock(T0);
    const token = await new DoorCredentialIssuer(door, clock).mint('rnr_1');
    clock.advance(59_000);
    expect(await new DoorCredentialVerifier(door, clock).verify(token)).toEqual({
      runner_id: 'rnr_1',
    });
  });

  it('refuses an expired one, an untrusted key, and a token of another audience', async () => {
    const clock = new ManualClock(T0);
    const token = await new DoorCredentialIssuer(door, clock).mint('rnr_1');
    const verifier = new DoorCredentialVerifier(door, clock);
    clock.advance(66_000); // 60 s + 5 s tolerance, and then some
    expect(await verifier.verify(token)).toBeUndefined();
    const now = new ManualClock(T0);
    const foreign = await new DoorCredentialIssuer(stranger, now).mint('rnr_1');
    expect(await new DoorCredentialVerifier(door, now).verify(foreign)).toBeUndefined();
    const key = door.current();
    const otherAudience = await new SignJWT({ runner_id: 'rnr_1' })
      .setProtectedHeader({ alg: 'EdDSA', kid: key.kid })
      .setIssuer('leoflow-door')
      .setAudience('leoflow-agent')
      .setIssuedAt(T0 / 1000)
      .setExpirationTime(T0 / 1000 + 60)
      .setJti('j')
      .sign(key.privateKey);
    expect(await new DoorCredentialVerifier(door, now).verify(otherAudience)).toBeUndefined();
    const agentSigned = await new DoorCredentialIssuer(agentKeys, now).mint('rnr_1');
    expect(await new DoorCredentialVerifier(door, now).verify(agentSigned)).toBeUndefined();
    expect(await new DoorCredentialVerifier(door, now).verify('garbage')).toBeUndefined();
  });
});
