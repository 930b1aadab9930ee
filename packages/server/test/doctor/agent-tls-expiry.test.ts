import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { selfSignedPair } from '../support/self-signed.js';
import { defaultServerConfig } from '../../src/config/server-config.js';
import { agentChannel } from '../../src/doctor/agent-channel.js';
import { safeStat } from '../../src/doctor/facts.js';
import { Findings } from '../../src/doctor/findings.js';
import type { DoctorDeps } from '../../src/doctor/types.js';
import { nodeDoctorDeps } from '../../src/doctor/node-deps.js';

const root = mkdtempSync(join(tmpdir(), 'leoflow-doctor-tls-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const DAY = 86_400_000;
const { cert, key } = selfSignedPair(root, { name: 'doctor' });
const notAfter = Date.parse(new X509Certificate(readFileSync(cert)).validTo);

/** The agent section of doctor over the real certificate file, at an injected time. */
async function expiryCheck(nowMs: number, certFile = cert) {
  const cfg = defaultServerConfig(root);
  cfg.agent.tls = { certFile, keyFile: key, caFile: null };
  const deps: DoctorDeps = { ...nodeDoctorDeps({}), now: () => nowMs };
  const findings = new Findings();
  await agentChannel({
    cfg,
    deps,
    opts: {},
    stat: safeStat(deps),
    check: findings.check,
    expose: findings.expose,
  });
  return findings.checks.find((c) => c.id === 'agent.tls_expiry');
}

describe('doctor: agent certificate expiry', () => {
  it('ok with 30 days or more left, naming the date and the days', async () => {
    const c = await expiryCheck(notAfter - 30 * DAY);
    expect(c).toMatchObject({ status: 'ok' });
    expect(c?.message).toContain('(30 days left)');
    expect(c?.message).toContain(new Date(notAfter).toISOString());
  });

  it('warns under 30 days', async () => {
    const c = await expiryCheck(notAfter - 29 * DAY - 1);
    expect(c).toMatchObject({ status: 'warn' });
    expect(c?.message).toContain('29 day(s) left');
    expect(c?.message).toContain('renew it');
  });

  it('fails once expired', async () => {
    expect(await expiryCheck(notAfter + 1)).toMatchObject({ status: 'fail' });
    expect((await expiryCheck(notAfter + 1))?.message).toContain('expired on');
    expect(await expiryCheck(notAfter - 1)).toMatchObject({ status: 'warn' });
  });

  it('fails on a certificate file that holds no certificate', async () => {
    expect(await expiryCheck(notAfter - 60 * DAY, key)).toMatchObject({
      status: 'fail',
      message: `${key} holds no PEM certificate`,
    });
  });
});
