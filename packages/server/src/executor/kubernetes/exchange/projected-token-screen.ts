/**
 * A look at a projected service-account token's claims WITHOUT verifying its signature, before
 * any TokenReview: what cannot be a live pod's token for our audience is refused here, so a
 * caller with no credential at all (the exchange takes no bearer) cannot make the control plane
 * spend the apiserver's budget on garbage. Passing this screen proves nothing; only the
 * TokenReview that follows does.
 */

/** How far a token's exp may lie in the past by our clock (clock skew with the apiserver). */
export const EXPIRY_LEEWAY_MS = 5 * 60_000;

export type ScreenVerdict = 'plausible' | 'malformed' | 'not_authenticated' | 'not_a_pod';

function decodeSegment(segment: string): Record<string, unknown> | undefined {
  if (!/^[A-Za-z0-9_-]+$/.test(segment)) return undefined;
  try {
    const value: unknown = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
    return value !== null && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * `plausible`: a JWT whose unverified claims name `audience`, a pod binding (name and uid) and an
 * exp not past (within EXPIRY_LEEWAY_MS). Otherwise the refusal the TokenReview would have led
 * to: not a JWT → malformed; another audience or expired → not_authenticated; no pod binding
 * (`kubectl create token` without --bound-object-kind Pod) → not_a_pod.
 */
export function screenProjectedToken(
  credential: string,
  audience: string,
  nowMs: number,
): ScreenVerdict {
  const parts = credential.split('.');
  if (parts.length !== 3) return 'malformed';
  const header = decodeSegment(parts[0]!);
  const claims = decodeSegment(parts[1]!);
  if (!header || !claims || typeof header.alg !== 'string') return 'malformed';
  const aud = claims.aud;
  const audiences = typeof aud === 'string' ? [aud] : Array.isArray(aud) ? aud : [];
  if (!audiences.includes(audience)) return 'not_authenticated';
  if (typeof claims.exp !== 'number' || claims.exp * 1000 + EXPIRY_LEEWAY_MS < nowMs) {
    return 'not_authenticated';
  }
  const k8s = claims['kubernetes.io'] as { pod?: { name?: unknown; uid?: unknown } } | undefined;
  const pod = k8s && typeof k8s === 'object' ? k8s.pod : undefined;
  if (!pod || typeof pod.name !== 'string' || typeof pod.uid !== 'string') return 'not_a_pod';
  if (pod.name === '' || pod.uid === '') return 'not_a_pod';
  return 'plausible';
}
