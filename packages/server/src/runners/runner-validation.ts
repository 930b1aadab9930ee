import { AuthError, MAX_RUNNER_LABELS, RUNNER_LABEL_KEY, RUNNER_LABEL_VALUE } from '@leoflow/core';
import type { RunnerKind, RunnerSshTarget } from '../store/directory-types.js';

const NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;
const FINGERPRINT = /^SHA256:[A-Za-z0-9+/]{43}$/;
const KEY_TYPE =
  /^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com|sk-ecdsa-sha2-nistp256@openssh\.com)$/;
const KEY_BLOB = /^[A-Za-z0-9+/]+={0,3}$/;
export const MAX_RUNNER_CAPACITY = 1024;

export interface RunnerInput {
  name: string;
  kind: RunnerKind;
  labels?: Record<string, string>;
  capacity?: number;
  ssh?: { host: string; port?: number; user: string; credential: string; host_key: string };
}

export interface ValidRunnerInput {
  name: string;
  kind: RunnerKind;
  labels: Record<string, string>;
  capacity: number;
  ssh: RunnerSshTarget | null;
}

function invalid(message: string, field: string): AuthError {
  return new AuthError('LF_RUNNER_INVALID', message, { field });
}

/**
 * A host key pinned at registration: an OpenSSH `SHA256:` fingerprint, or a known_hosts line
 * (`[hosts] keytype base64 [comment]`). Never learned on first use, so it is required.
 */
export function isPinnedHostKey(s: string): boolean {
  if (FINGERPRINT.test(s)) return true;
  const parts = s.trim().split(/\s+/);
  const typeAt = parts.findIndex((p) => KEY_TYPE.test(p));
  if (typeAt < 0 || typeAt > 1) return false;
  const blob = parts[typeAt + 1];
  return blob !== undefined && KEY_BLOB.test(blob) && blob.length >= 32;
}

/** Checks a registration; the error names the field and the rule, never a value's secret. */
export function validateRunnerInput(input: RunnerInput): ValidRunnerInput {
  if (typeof input.name !== 'string' || !NAME.test(input.name)) {
    throw invalid(
      'runner name: use 1-63 lowercase letters, digits, ".", "_" and "-", starting with a letter or digit',
      'name',
    );
  }
  if (input.kind !== 'inbound' && input.kind !== 'ssh') {
    throw invalid('runner kind: inbound or ssh', 'kind');
  }
  const labels = input.labels ?? {};
  const entries = Object.entries(labels);
  if (entries.length > MAX_RUNNER_LABELS)
    throw invalid(`at most ${MAX_RUNNER_LABELS} labels`, 'labels');
  for (const [k, v] of entries) {
    if (!RUNNER_LABEL_KEY.test(k)) {
      throw invalid(`label key ${JSON.stringify(k)}: 1-63 of a-z 0-9 . _ / -`, 'labels');
    }
    if (typeof v !== 'string' || !RUNNER_LABEL_VALUE.test(v)) {
      throw invalid(`label ${k}: the value may hold up to 63 of A-Z a-z 0-9 . _ -`, 'labels');
    }
  }
  const capacity = input.capacity ?? 1;
  if (!Number.isInteger(capacity) || capacity < 1 || capacity > MAX_RUNNER_CAPACITY) {
    throw invalid(`capacity: a whole number from 1 to ${MAX_RUNNER_CAPACITY}`, 'capacity');
  }
  if (input.kind === 'inbound') {
    if (input.ssh !== undefined) throw invalid('ssh details are for --kind ssh only', 'ssh');
    return { name: input.name, kind: 'inbound', labels: { ...labels }, capacity, ssh: null };
  }
  const ssh = input.ssh;
  if (ssh === undefined) {
    throw invalid('an ssh runner needs --host, --user, --credential and --host-key', 'ssh');
  }
  if (typeof ssh.host !== 'string' || !/^[A-Za-z0-9.:[\]_-]{1,253}$/.test(ssh.host)) {
    throw invalid('ssh host: a host name or IP address', 'ssh.host');
  }
  const port = ssh.port ?? 22;
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw invalid('ssh port: 1-65535', 'ssh.port');
  }
  if (typeof ssh.user !== 'string' || !/^[a-z_][a-z0-9_.-]{0,31}$/i.test(ssh.user)) {
    throw invalid('ssh user: a POSIX user name', 'ssh.user');
  }
  if (typeof ssh.credential !== 'string' || ssh.credential.length === 0) {
    throw invalid(
      'ssh credential: the id of a Connection that holds the private key',
      'ssh.credential',
    );
  }
  if (typeof ssh.host_key !== 'string' || !isPinnedHostKey(ssh.host_key)) {
    throw invalid(
      'ssh host key: a known_hosts line (`ssh-keyscan <host>`) or a SHA256: fingerprint (`ssh-keygen -lf`); it is pinned, never learned on first use',
      'ssh.host_key',
    );
  }
  return {
    name: input.name,
    kind: 'ssh',
    labels: { ...labels },
    capacity,
    ssh: {
      host: ssh.host,
      port,
      user: ssh.user,
      credential: ssh.credential,
      host_key: ssh.host_key.trim(),
    },
  };
}
