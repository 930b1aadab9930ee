import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ImageSpec } from '@leoflow/kube-double';

/** The built agent bundle: what the agent image (deploy/agent.Dockerfile) runs. */
export const AGENT_BUNDLE = new URL('../../../agent/dist/leoflow-agent.mjs', import.meta.url)
  .pathname;

/**
 * The agent image's entrypoint in local terms, for the kubelet simulator's image map: the
 * image's filesystem is the pod's mounts (the simulator roots each volumeMount under
 * LEOFLOW_KUBELET_VOLUME_ROOT), then the agent bundle runs in the same process, as the image's
 * ENTRYPOINT would. Written into `dir`.
 */
export function agentImage(dir: string): ImageSpec {
  const shim = join(dir, 'agent-image-entrypoint.mjs');
  writeFileSync(
    shim,
    [
      "const root = process.env.LEOFLOW_KUBELET_VOLUME_ROOT ?? '';",
      'delete process.env.LEOFLOW_KUBELET_VOLUME_ROOT;',
      "for (const k of ['LEOFLOW_WORKDIR', 'HOME', 'TMPDIR', 'NODE_EXTRA_CA_CERTS'])",
      "  if (process.env[k]?.startsWith('/')) process.env[k] = root + process.env[k];",
      `await import(${JSON.stringify(AGENT_BUNDLE)});`,
      '',
    ].join('\n'),
  );
  return { entrypoint: [process.execPath, shim] };
}
