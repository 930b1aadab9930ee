// A container's environment as the kubelet builds it: literal values, secretKeyRef and
// configMapKeyRef (a missing object or key is CreateContainerConfigError unless optional),
// fieldRef to the pod's own fields, envFrom, and $(VAR) references expanded against the variables
// defined before them.
import type { ConfigMap, Container, Pod, Secret } from './objects.js';

export class ContainerConfigError extends Error {}

/** The pod's Secrets and ConfigMaps as the kubelet read them (undefined: not found). */
export interface ObjectLookup {
  secret(name: string): Secret | undefined;
  configMap(name: string): ConfigMap | undefined;
}

function fieldRefValue(pod: Pod, path: string): string {
  const labels = /^metadata\.labels\['(.+)'\]$/.exec(path);
  if (labels) return pod.metadata.labels?.[labels[1] ?? ''] ?? '';
  const annotations = /^metadata\.annotations\['(.+)'\]$/.exec(path);
  if (annotations) return pod.metadata.annotations?.[annotations[1] ?? ''] ?? '';
  switch (path) {
    case 'metadata.name':
      return pod.metadata.name ?? '';
    case 'metadata.namespace':
      return pod.metadata.namespace ?? '';
    case 'metadata.uid':
      return pod.metadata.uid ?? '';
    case 'spec.nodeName':
      return pod.spec.nodeName ?? '';
    case 'spec.serviceAccountName':
      return pod.spec.serviceAccountName ?? '';
    case 'status.podIP':
    case 'status.hostIP':
      return '127.0.0.1';
    default:
      throw new ContainerConfigError(`unsupported fieldRef ${path}`);
  }
}

/** Expands $(NAME) from `defined`; $$ escapes; an undefined reference stays as written. */
export function expandReferences(text: string, defined: Record<string, string>): string {
  return text.replace(
    /\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g,
    (match, name: string | undefined) => {
      if (match === '$$') return '$';
      return name !== undefined && name in defined ? (defined[name] ?? '') : match;
    },
  );
}

export function containerEnvironment(
  pod: Pod,
  container: Container,
  objects: ObjectLookup,
): Record<string, string> {
  const namespace = pod.metadata.namespace ?? '';
  const env: Record<string, string> = {};
  const envFrom =
    (
      container as {
        envFrom?: {
          prefix?: string;
          secretRef?: { name: string; optional?: boolean };
          configMapRef?: { name: string; optional?: boolean };
        }[];
      }
    ).envFrom ?? [];
  for (const source of envFrom) {
    if (source.secretRef) {
      const secret = objects.secret(source.secretRef.name);
      if (secret === undefined) {
        if (source.secretRef.optional) continue;
        throw new ContainerConfigError(`secret "${source.secretRef.name}" not found`);
      }
      for (const [key, value] of Object.entries(secret.data ?? {})) {
        env[`${source.prefix ?? ''}${key}`] = Buffer.from(value, 'base64').toString('utf8');
      }
    }
    if (source.configMapRef) {
      const map = objects.configMap(source.configMapRef.name);
      if (map === undefined) {
        if (source.configMapRef.optional) continue;
        throw new ContainerConfigError(`configmap "${source.configMapRef.name}" not found`);
      }
      for (const [key, value] of Object.entries(map.data ?? {}))
        env[`${source.prefix ?? ''}${key}`] = value;
    }
  }
  for (const variable of container.env ?? []) {
    const from = variable.valueFrom;
    if (from === undefined) {
      env[variable.name] = expandReferences(variable.value ?? '', env);
      continue;
    }
    if (from.secretKeyRef) {
      const ref = from.secretKeyRef;
      const secret = objects.secret(ref.name);
      const value = secret?.data?.[ref.key];
      if (value === undefined) {
        if (ref.optional) continue;
        throw new ContainerConfigError(
          secret === undefined
            ? `secret "${ref.name}" not found`
            : `couldn't find key ${ref.key} in Secret ${namespace}/${ref.name}`,
        );
      }
      env[variable.name] = Buffer.from(value, 'base64').toString('utf8');
    } else if (from.configMapKeyRef) {
      const ref = from.configMapKeyRef;
      const map = objects.configMap(ref.name);
      const value = map?.data?.[ref.key];
      if (value === undefined) {
        if (ref.optional) continue;
        throw new ContainerConfigError(
          map === undefined
            ? `configmap "${ref.name}" not found`
            : `couldn't find key ${ref.key} in ConfigMap ${namespace}/${ref.name}`,
        );
      }
      env[variable.name] = value;
    } else if (from.fieldRef) {
      env[variable.name] = fieldRefValue(pod, from.fieldRef.fieldPath);
    }
  }
  return env;
}
