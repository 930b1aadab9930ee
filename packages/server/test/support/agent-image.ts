import type { ImageSpec } from '@leoflow/kube-double';

/**
 * What the agent image (deploy/agent.Dockerfile) runs, for the kubelet simulator's image map:
 * agent-image-entrypoint.mjs, which maps the pod's mounts and runs the built agent bundle
 * (bench/attempt-start.mjs maps the image to the same file).
 */
export function agentImage(): ImageSpec {
  return {
    entrypoint: [
      process.execPath,
      new URL('./agent-image-entrypoint.mjs', import.meta.url).pathname,
    ],
  };
}
