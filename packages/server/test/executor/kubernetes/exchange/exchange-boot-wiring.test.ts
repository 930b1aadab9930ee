/**
 * Boot fails closed under auth.agent_token_transport=exchange — through startControlPlane, not
 * the checkExchangeBoot helper alone (token-exchange.test.ts and test/deploy/exchange.test.ts
 * cover the helper): the control plane refuses to start without a Kubernetes executor, over a
 * cleartext non-loopback agent channel, and as the default install's control-plane identity
 * (the real deploy/ manifests applied with the real kubectl to the apiserver double, no
 * TokenReview grant); with deploy/components/exchange applied it boots.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isLeoflowError } from '@leoflow/core';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServerConfig } from '../../../../src/config/server-config.js';
import { startControlPlane } from '../../../../src/boot/control-plane.js';
import {
  startKubectlCluster,
  type KubectlCluster,
} from '../../../../../../test/support/manifests.js';
import { exchangePlaneConfig } from '../../../support/exchange-plane-config.js';
import { ACME_POOL } from '../../warm-pools/pool-fixtures.js';

/** The default install, and the same install with deploy/components/exchange. */
const DEFAULT_INSTALL = 'deploy/overlays/example';
const WITH_EXCHANGE = 'test/deploy/fixtures/exchange';
/** Where both put the control plane (its ServiceAccount) and the default tenant's pods. */
const NAMESPACE = 'leoflow-prod';
const IMAGE = 'leoflow-agent:boot';

let k: KubectlCluster;
/** A kubeconfig as the install's control-plane ServiceAccount (not the double's admin). */
let controlPlaneKubeconfig: string;
const scratch = mkdtempSync(join(tmpdir(), 'leoflow-exchange-boot-'));
let serial = 0;

beforeAll(async () => {
  k = await startKubectlCluster('leoflow-exchange-boot-double-');
  await k.kubectl(['create', 'namespace', NAMESPACE]);
  await k.apply(DEFAULT_INSTALL);
  controlPlaneKubeconfig = await k.controlPlaneKubeconfig(NAMESPACE);
}, 60_000);

afterAll(async () => {
  await k?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

/** An exchange-mode configuration on a fresh data dir; `kubeconfig` null: no Kubernetes. */
function exchangeConfig(kubeconfig: string | null): ServerConfig {
  serial += 1;
  return exchangePlaneConfig({
    dir: join(scratch, `plane-${serial}`),
    kubeconfig,
    image: IMAGE,
    instance: `boot-${serial}`,
    tenants: { default: NAMESPACE },
    serviceAccount: 'default',
  });
}

/**
 * What startControlPlane did with `cfg`: `<code>: <message>` of its refusal, or 'booted' (the
 * control plane is closed again before this returns, so a wrong boot leaks nothing into the
 * next case).
 */
async function bootOutcome(cfg: ServerConfig, logger = pino({ level: 'silent' })): Promise<string> {
  let cp;
  try {
    cp = await startControlPlane(cfg, { logger });
  } catch (err) {
    if (isLeoflowError(err)) return `${err.code}: ${err.message}`;
    throw err;
  }
  await cp.close();
  return 'booted';
}

describe('startControlPlane under auth.agent_token_transport=exchange', () => {
  it('refuses to boot without a Kubernetes executor: LF_EXCHANGE_NO_KUBERNETES', async () => {
    const cfg = exchangeConfig(null);
    expect(cfg.kubernetes).toBeNull();
    expect(await bootOutcome(cfg)).toMatch(/^LF_EXCHANGE_NO_KUBERNETES: /);
  });

  it('refuses to boot over a cleartext non-loopback agent channel: LF_EXCHANGE_INSECURE_CHANNEL', async () => {
    const cfg = exchangeConfig(controlPlaneKubeconfig);
    cfg.agent.host = '0.0.0.0';
    expect(cfg.agent.tls).toBeNull();
    expect(await bootOutcome(cfg)).toMatch(/^LF_EXCHANGE_INSECURE_CHANNEL: /);
  });

  it('refuses warm pools unless transport=exchange and liveness=enforce, naming both keys, before it opens anything', async () => {
    const warm = (transport: 'envvar' | 'exchange', liveness: 'observe' | 'enforce') => {
      const cfg = exchangeConfig(controlPlaneKubeconfig);
      cfg.credentials.agentTokenTransport = transport;
      cfg.credentials.secretLivenessMode = liveness;
      cfg.credentials.warmPoolsEnabled = true;
      return cfg;
    };
    const both = await bootOutcome(warm('envvar', 'observe'));
    expect(both).toMatch(/^LF_CONFIG_INVALID: /);
    expect(both).toContain('auth.agent_token_transport is "envvar"');
    expect(both).toContain('auth.secret_liveness_mode is "observe"');
    const cfg = warm('exchange', 'observe');
    const one = await bootOutcome(cfg);
    expect(one).toContain('auth.secret_liveness_mode is "observe"');
    expect(one).not.toContain('auth.agent_token_transport is');
    // refused before the data directory was made: nothing to clean up after a refused boot
    expect(existsSync(cfg.dataDir)).toBe(false);
    // both chosen: past the warm-pool guard, to the next check (this identity lacks the
    // TokenReview grant), so the guard does not refuse the configuration it asks for
    expect(await bootOutcome(warm('exchange', 'enforce'))).toMatch(
      /^LF_EXCHANGE_TOKENREVIEW_FORBIDDEN: /,
    );

    // a pool whose tenant sets default_resources would never be used (warm routing sends an
    // attempt with resources cold): said at start, by code
    const logged = async (defaultResources: Record<string, Record<string, string>>) => {
      const lines: string[] = [];
      const withPool = warm('exchange', 'enforce');
      withPool.kubernetes!.tenants['default']!.defaultResources = defaultResources;
      withPool.kubernetes!.warmPools = [
        { ...ACME_POOL, tenant: 'default', namespace: NAMESPACE, serviceAccount: 'default' },
      ];
      await bootOutcome(
        withPool,
        pino({ level: 'warn' }, { write: (l: string) => void lines.push(l) }),
      );
      return lines.join('');
    };
    expect(await logged({ limits: { cpu: '500m' } })).toContain('"code":"LF_WARM_POOL_UNUSED"');
    expect(await logged({})).not.toContain('LF_WARM_POOL_UNUSED');
  });

  it('as the default install’s identity (no TokenReview grant): refused with LF_EXCHANGE_TOKENREVIEW_FORBIDDEN; with deploy/components/exchange applied: boots', async () => {
    // the grant really is missing: the double answers the SelfSubjectAccessReview "no"
    const can = await k
      .kubectl(
        ['auth', 'can-i', 'create', 'tokenreviews.authentication.k8s.io'],
        controlPlaneKubeconfig,
      )
      .catch((err: { stdout?: string }) => err.stdout ?? '');
    expect(can.trim()).toBe('no');
    expect(await bootOutcome(exchangeConfig(controlPlaneKubeconfig))).toMatch(
      /^LF_EXCHANGE_TOKENREVIEW_FORBIDDEN: /,
    );

    await k.apply(WITH_EXCHANGE);
    expect(await bootOutcome(exchangeConfig(controlPlaneKubeconfig))).toBe('booted');
  }, 60_000);
});
