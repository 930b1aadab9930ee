import { SignJWT } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { AgentTokenIssuer } from '../../src/auth/agent-token.js';
import { loadSigningKeyring, type FileSigningKeyring } from '../../src/auth/signing-keys.js';
import {
  WORKER_AUDIENCE,
  WorkerTokenIssuer,
  type WorkerIdentity,
} from '../../src/auth/worker-token.js';
import { MIN, T0, identity, useTempDirs } from './fixtures.js';

const tempDir = useTempDirs();
let ring: FileSigningKeyring;
let attempts: AgentTokenIssuer;
let workers: WorkerTokenIssuer;

const worker: WorkerIdentity = {
  pool_key: 'wp-0123456789abcdef',
  tenant_id: 'acme',
  pod_name: 'leoflow-worker-abc',
  pod_uid: 'uid-1',
};

beforeAll(async () => {
  ring = await loadSigningKeyring(tempDir(), 'agent', { nowMs: T0 });
  attempts = new AgentTokenIssuer(ring, 600);
  workers = new WorkerTokenIssuer(ring, 600);
});

describe('the worker-scoped bootstrap token', () => {
  it('verifies as a worker token, with its own audience and no attempt claims', async () => {
    const { token, expiresAtMs } = await workers.mint(worker, T0);
    expect(expiresAtMs).toBe(T0 + 600_000);
    const claims = await workers.verify(token, T0 + MIN);
    expect(claims).toMatchObject(worker);
    const payload = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as Record<
      string,
      unknown
    >;
    expect(payload.aud).toBe(WORKER_AUDIENCE);
    expect(payload.scp).toBe('worker');
    expect(payload).not.toHaveProperty('ti');
  });

  it('the attempt verifier refuses a worker token (same keyring, other audience)', async () => {
    const { token } = await workers.mint(worker, T0);
    await expect(attempts.verify(token, T0)).rejects.toThrow('invalid agent token');
  });

  it('the worker verifier refuses an attempt token', async () => {
    const token = await attempts.mint(identity, T0);
    await expect(workers.verify(token, T0)).rejects.toThrow('invalid worker token');
  });

  it('refuses worker-shaped claims signed by our key for the attempt audience, or without scp=worker', async () => {
    const key = ring.current();
    const craft = (aud: string, scp: string | undefined) =>
      new SignJWT({
        ...(scp ? { scp } : {}),
        tid: 'acme',
        pool: worker.pool_key,
        pod: worker.pod_name,
        puid: worker.pod_uid,
      })
        .setProtectedHeader({ alg: 'EdDSA', kid: key.kid, typ: 'JWT' })
        .setIssuer('leoflow')
        .setAudience(aud)
        .setSubject(`worker:${worker.pool_key}:${worker.pod_uid}`)
        .setIssuedAt(Math.floor(T0 / 1000))
        .setExpirationTime(Math.floor(T0 / 1000) + 600)
        .sign(key.privateKey);
    await expect(workers.verify(await craft(WORKER_AUDIENCE, 'worker'), T0)).resolves.toMatchObject(
      worker,
    );
    await expect(workers.verify(await craft('leoflow-agent', 'worker'), T0)).rejects.toThrow(
      'invalid worker token',
    );
    await expect(workers.verify(await craft(WORKER_AUDIENCE, undefined), T0)).rejects.toThrow(
      'invalid worker token',
    );
  });

  it('is short-lived: valid until exp (+5 s tolerance), refused as expired after, by the injected time', async () => {
    const { token } = await workers.mint(worker, T0);
    await expect(workers.verify(token, T0 + 600_000)).resolves.toMatchObject(worker);
    await expect(workers.verify(token, T0 + 606_000)).rejects.toThrow('worker token expired');
  });

  it('refuses a forged signature', async () => {
    const { token } = await workers.mint(worker, T0);
    await expect(workers.verify(`${token.slice(0, -4)}AAAA`, T0)).rejects.toThrow(
      'invalid worker token',
    );
  });

  it('will not be built on the user keyring', async () => {
    const userRing = await loadSigningKeyring(tempDir(), 'user', { nowMs: T0 });
    expect(() => new WorkerTokenIssuer(userRing)).toThrow(RangeError);
  });
});
