/**
 * deploy/components/warm-pools rendered by the real `kubectl kustomize` (temporary --cache-dir):
 * it turns warm pools on, and the server's boot validation refuses the result unless the token
 * transport is exchange AND liveness is enforce, naming both keys.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { loadCredentialPlaneConfig } from '@leoflow/core';
import { afterAll, describe, expect, it } from 'vitest';
import {
  container,
  find,
  literalEnv,
  render as kustomize,
  ROOT,
  shippedConfig,
  type Manifest,
} from '../support/manifests.js';

const scratch = mkdtempSync(join(tmpdir(), 'leoflow-warm-kustomize-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** An overlay of base + the warm-pools component (+ extra env on the scheduler), rendered. */
function render(name: string, extraEnv: Record<string, string>): Manifest[] {
  const dir = join(scratch, name);
  execFileSync('mkdir', ['-p', dir]);
  const patches = Object.entries(extraEnv).map(
    ([k, v]) => `      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: { name: ${k}, value: "${v}" }`,
  );
  writeFileSync(
    join(dir, 'kustomization.yaml'),
    `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [${relative(dir, join(ROOT, 'deploy/base'))}]
components: [${relative(dir, join(ROOT, 'deploy/components/warm-pools'))}]
${patches.length ? `patches:\n  - target: { kind: Deployment, name: leoflow-scheduler }\n    patch: |-\n${patches.join('\n')}\n` : ''}`,
  );
  return kustomize(dir, { loadRestrictorNone: true });
}

/** What the scheduler would boot with: the config file and its literal env. */
function boot(objects: Manifest[]) {
  const { executor: _executor, ...file } = shippedConfig(objects);
  const env = literalEnv(find(objects, 'Deployment', 'leoflow-scheduler'));
  return () => loadCredentialPlaneConfig({ file, env });
}

function refusal(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    expect((e as { code?: string }).code).toBe('LF_CONFIG_INVALID');
    return (e as Error).message;
  }
  throw new Error('booted');
}

describe('deploy/components/warm-pools', () => {
  it('sets execution.warm_pools_enabled on both Deployments', () => {
    const objects = render('plain', {});
    for (const name of ['leoflow-scheduler', 'leoflow-api']) {
      expect(container(find(objects, 'Deployment', name)).env).toContainEqual({
        name: 'LEOFLOW_EXECUTION_WARM_POOLS_ENABLED',
        value: 'true',
      });
    }
  });

  it('alone (transport envvar): the server refuses to boot, naming auth.agent_token_transport', () => {
    const msg = refusal(boot(render('alone', {})));
    expect(msg).toContain('auth.agent_token_transport');
    expect(msg).toContain('auth.secret_liveness_mode=enforce');
  });

  it('with exchange but liveness observe: refused, naming auth.secret_liveness_mode', () => {
    const msg = refusal(
      boot(
        render('observe', {
          LEOFLOW_AUTH_AGENT_TOKEN_TRANSPORT: 'exchange',
          LEOFLOW_AUTH_SECRET_LIVENESS_MODE: 'observe',
        }),
      ),
    );
    expect(msg).toContain('auth.secret_liveness_mode is "observe"');
  });

  it('with exchange and enforce: boots with warm pools on', () => {
    const start = boot(render('both', { LEOFLOW_AUTH_AGENT_TOKEN_TRANSPORT: 'exchange' }));
    const { config } = start();
    expect(config).toMatchObject({
      warmPoolsEnabled: true,
      agentTokenTransport: 'exchange',
      secretLivenessMode: 'enforce',
    });
  });
});
