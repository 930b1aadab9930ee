import { createHash } from 'node:crypto';

/**
 * A runner's pinned host key, as registration stored it: the whole public key (from a
 * known_hosts line) or only its OpenSSH SHA256 fingerprint. Either way the key is decided at
 * registration; a dial never learns one.
 */
export type PinnedHostKey =
  { kind: 'key'; type: string; blob: Buffer } | { kind: 'fingerprint'; fingerprint: string };

/** Host key algorithms that a key of each type can sign the key exchange with. */
const ALGORITHMS_BY_KEY_TYPE: Record<string, string[]> = {
  'ssh-ed25519': ['ssh-ed25519'],
  'ssh-rsa': ['rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa'],
  'ecdsa-sha2-nistp256': ['ecdsa-sha2-nistp256'],
  'ecdsa-sha2-nistp384': ['ecdsa-sha2-nistp384'],
  'ecdsa-sha2-nistp521': ['ecdsa-sha2-nistp521'],
};

/** Reads what runner validation accepted (`isPinnedHostKey`): a fingerprint or a known_hosts line. */
export function pinnedHostKey(text: string): PinnedHostKey {
  const s = text.trim();
  if (s.startsWith('SHA256:')) return { kind: 'fingerprint', fingerprint: s };
  const parts = s.split(/\s+/);
  // `[hosts] keytype base64 [comment]`: the type is the first or second field.
  const at = parts.findIndex((p) => p in ALGORITHMS_BY_KEY_TYPE || p.startsWith('sk-'));
  const type = parts[at];
  const blob = parts[at + 1];
  if (at < 0 || type === undefined || blob === undefined) {
    throw new Error('not a known_hosts line nor a SHA256: fingerprint');
  }
  return { kind: 'key', type, blob: Buffer.from(blob, 'base64') };
}

/** OpenSSH's form: `SHA256:` and the unpadded base64 of the key blob's SHA-256. */
export function hostKeyFingerprint(blob: Buffer): string {
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

/** Whether the key the server presented is the pinned one (public values: no timing concern). */
export function matchesPin(pin: PinnedHostKey, presented: Buffer): boolean {
  return pin.kind === 'key'
    ? presented.equals(pin.blob)
    : hostKeyFingerprint(presented) === pin.fingerprint;
}

/**
 * The host key algorithms to offer: with a whole key pinned, only those of its type, so a
 * server holding several host keys signs with the pinned one instead of being refused for
 * showing another. A bare fingerprint does not say its type, so every algorithm is offered
 * (the server's preferred key must then be the pinned one).
 */
export function hostKeyAlgorithms(pin: PinnedHostKey): string[] | undefined {
  return pin.kind === 'key' ? ALGORITHMS_BY_KEY_TYPE[pin.type] : undefined;
}

export function describePin(pin: PinnedHostKey): string {
  return pin.kind === 'key' ? `${pin.type} ${hostKeyFingerprint(pin.blob)}` : pin.fingerprint;
}
