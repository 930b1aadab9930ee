/** What the register form holds, as typed. */
export interface RunnerFormFields {
  name: string;
  kind: 'inbound' | 'ssh';
  labels: string;
  capacity: string;
  host: string;
  port: string;
  user: string;
  credential: string;
  host_key: string;
}

export interface RunnerRegistration {
  name: string;
  kind: 'inbound' | 'ssh';
  labels: Record<string, string>;
  capacity: number;
  ssh?: { host: string; port: number; user: string; credential: string; host_key: string };
}

/**
 * `k=v,k2=v2` (the CLI's `--labels` form) into an object, or the problem with it. The server
 * checks each key and value; this only splits.
 */
export function parseLabels(text: string): Record<string, string> | string {
  const labels: Record<string, string> = {};
  for (const part of text.split(',')) {
    const item = part.trim();
    if (item === '') continue;
    const eq = item.indexOf('=');
    if (eq <= 0) return `labels: "${item}" is not key=value`;
    labels[item.slice(0, eq).trim()] = item.slice(eq + 1).trim();
  }
  return labels;
}

/** The POST /api/v1/runners body the form describes, or what to correct first. */
export function runnerRegistration(f: RunnerFormFields): RunnerRegistration | string {
  const labels = parseLabels(f.labels);
  if (typeof labels === 'string') return labels;
  const capacity = f.capacity.trim() === '' ? 1 : Number(f.capacity);
  if (!Number.isInteger(capacity)) return 'capacity: a whole number from 1 to 1024';
  const body: RunnerRegistration = { name: f.name.trim(), kind: f.kind, labels, capacity };
  if (f.kind === 'inbound') return body;
  const port = f.port.trim() === '' ? 22 : Number(f.port);
  if (!Number.isInteger(port)) return 'ssh port: a whole number from 1 to 65535';
  return {
    ...body,
    ssh: {
      host: f.host.trim(),
      port,
      user: f.user.trim(),
      credential: f.credential,
      host_key: f.host_key.trim(),
    },
  };
}
