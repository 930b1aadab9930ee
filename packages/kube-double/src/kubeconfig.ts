// A kubeconfig for the double: one cluster (with its CA when serving HTTPS), one user (a bearer
// token), one context, written as JSON (a kubeconfig may be YAML or JSON; kubectl and client-node
// read both).
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface KubeconfigOptions {
  server: string;
  token: string;
  caCertificate?: string;
  namespace?: string;
  user?: string;
}

export function kubeconfigDocument(options: KubeconfigOptions) {
  const cluster: Record<string, string> = { server: options.server };
  if (options.caCertificate !== undefined) {
    cluster['certificate-authority-data'] = Buffer.from(options.caCertificate).toString('base64');
  }
  const user = options.user ?? 'kube-double-user';
  const context: Record<string, string> = { cluster: 'kube-double', user };
  if (options.namespace !== undefined) context.namespace = options.namespace;
  return {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'kube-double', cluster }],
    users: [{ name: user, user: { token: options.token } }],
    contexts: [{ name: 'kube-double', context }],
    'current-context': 'kube-double',
    preferences: {},
  };
}

/** Writes `<dir>/<file>` (mode 0600: it holds a bearer token) and returns its path. */
export function writeKubeconfig(
  dir: string,
  options: KubeconfigOptions,
  file = 'kubeconfig',
): string {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, file);
  writeFileSync(path, `${JSON.stringify(kubeconfigDocument(options), null, 2)}\n`, { mode: 0o600 });
  return path;
}
