// The agent image's ENTRYPOINT in local terms, for the kubelet simulator's image map (see
// agent-image.ts): the image's filesystem is the pod's mounts (the simulator roots each
// volumeMount under LEOFLOW_KUBELET_VOLUME_ROOT), then the built agent bundle runs in this
// same process, as the image's entrypoint would.
const root = process.env.LEOFLOW_KUBELET_VOLUME_ROOT ?? '';
delete process.env.LEOFLOW_KUBELET_VOLUME_ROOT;
process.env.LEOFLOW_TERMINATION_LOG ??= '/dev/termination-log';
for (const k of [
  'LEOFLOW_WORKDIR',
  'HOME',
  'TMPDIR',
  'NODE_EXTRA_CA_CERTS',
  'LEOFLOW_EXCHANGE_TOKEN_FILE',
  'LEOFLOW_TERMINATION_LOG',
])
  if (process.env[k]?.startsWith('/')) process.env[k] = root + process.env[k];
await import(new URL('../../../agent/dist/leoflow-agent.mjs', import.meta.url).href);
