// Bound service-account tokens: minted by TokenRequest (serviceaccounts/<name>/token), checked by
// the service-account authenticator both for API requests and for TokenReview. RS256 JWTs signed
// with a key generated when the double starts; the claims are those the apiserver puts in a bound
// token, and validation follows the authenticator's order: signature, issuer, time window,
// audience, then the referenced ServiceAccount / Pod / Secret still existing with the same UID.
import {
  createHash,
  generateKeyPairSync,
  randomUUID,
  sign,
  verify,
  type KeyObject,
} from 'node:crypto';
import type { Clock } from './clock.js';
import type { KubeObject } from './objects.js';
import { findResourceType, type ResourceType } from './resources.js';
import type { ObjectStore } from './store.js';

export interface UserInfo {
  username: string;
  uid?: string;
  groups: string[];
  extra?: Record<string, string[]>;
}

export interface BoundObject {
  kind: 'Pod' | 'Secret' | 'Node';
  name: string;
  uid: string;
}

export interface TokenClaims {
  iss: string;
  sub: string;
  aud: string[];
  iat: number;
  nbf: number;
  exp: number;
  jti: string;
  'kubernetes.io': {
    namespace: string;
    serviceaccount: { name: string; uid: string };
    pod?: { name: string; uid: string };
    secret?: { name: string; uid: string };
    node?: { name: string; uid: string };
  };
}

export interface IssueRequest {
  namespace: string;
  serviceAccount: KubeObject;
  audiences: string[];
  expirationSeconds: number;
  bound?: BoundObject;
  /** The node a bound pod runs on: the apiserver records it in the claims (1.30+). */
  node?: { name: string; uid: string };
}

export type ReviewResult =
  | { authenticated: true; user: UserInfo; audiences: string[]; claims: TokenClaims }
  | { authenticated: false; error?: string };

/**
 * The leeway the authenticator grants on exp and nbf (go-jose's default of one minute, used by the
 * apiserver's claim validation) so small clock skew between nodes does not fail a live token.
 */
export const CLOCK_LEEWAY_SECONDS = 60;

/** A graceful pod deletion keeps the pod's tokens valid this long past its deletionTimestamp. */
export const DELETED_POD_TOKEN_GRACE_SECONDS = 60;

/** The shortest TokenRequest the apiserver accepts (10 minutes). */
export const MIN_EXPIRATION_SECONDS = 600;

function base64url(input: Buffer | string): string {
  return Buffer.from(input).toString('base64url');
}

function type(resource: string): ResourceType {
  const found = findResourceType('', 'v1', resource);
  if (found === undefined) throw new Error(`core resource ${resource} is not registered`);
  return found;
}

export class ServiceAccountTokens {
  private readonly privateKey: KeyObject;
  readonly publicKey: KeyObject;
  readonly keyId: string;

  constructor(
    private readonly store: ObjectStore,
    private readonly clock: Clock,
    readonly issuer: string,
    /** The apiserver's own audiences: the default of a TokenRequest and of a TokenReview. */
    readonly apiAudiences: string[],
  ) {
    const pair = generateKeyPairSync('rsa', { modulusLength: 2048 });
    this.privateKey = pair.privateKey;
    this.publicKey = pair.publicKey;
    this.keyId = base64url(
      createHash('sha256')
        .update(this.publicKey.export({ type: 'spki', format: 'der' }))
        .digest(),
    );
  }

  /**
   * The issuer's signing key (PEM), as the apiserver's --service-account-signing-key-file: for
   * tests that must present a token only the issuer could have made (e.g. one already expired).
   */
  signingKeyPem(): string {
    return this.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  }

  issue(request: IssueRequest): { token: string; claims: TokenClaims } {
    const now = Math.floor(this.clock.now() / 1000);
    const name = request.serviceAccount.metadata.name ?? '';
    const claims: TokenClaims = {
      iss: this.issuer,
      sub: `system:serviceaccount:${request.namespace}:${name}`,
      aud: request.audiences,
      iat: now,
      nbf: now,
      exp: now + request.expirationSeconds,
      jti: randomUUID(),
      'kubernetes.io': {
        namespace: request.namespace,
        serviceaccount: { name, uid: request.serviceAccount.metadata.uid ?? '' },
      },
    };
    const bound = request.bound;
    if (bound?.kind === 'Pod') claims['kubernetes.io'].pod = { name: bound.name, uid: bound.uid };
    if (bound?.kind === 'Secret')
      claims['kubernetes.io'].secret = { name: bound.name, uid: bound.uid };
    if (bound?.kind === 'Node') claims['kubernetes.io'].node = { name: bound.name, uid: bound.uid };
    if (bound?.kind === 'Pod' && request.node !== undefined)
      claims['kubernetes.io'].node = request.node;
    const header = base64url(JSON.stringify({ alg: 'RS256', kid: this.keyId }));
    const payload = base64url(JSON.stringify(claims));
    const signature = sign('sha256', Buffer.from(`${header}.${payload}`), this.privateKey);
    return { token: `${header}.${payload}.${base64url(signature)}`, claims };
  }

  /**
   * Authenticates a token for `audiences` (the apiserver's own when empty). Not authenticated
   * carries the reason in `error` only when the token was one of ours (a foreign token yields no
   * error, as an authenticator that does not recognise a token stays silent).
   */
  review(token: string, audiences: string[] = []): ReviewResult {
    const claims = this.verifySignature(token);
    if (claims === undefined) return { authenticated: false, error: 'invalid bearer token' };
    const fail = (reason: string): ReviewResult => ({
      authenticated: false,
      error: `[invalid bearer token, ${reason}]`,
    });
    const now = Math.floor(this.clock.now() / 1000);
    if (now > claims.exp + CLOCK_LEEWAY_SECONDS) return fail('service account token has expired');
    if (now + CLOCK_LEEWAY_SECONDS < claims.nbf)
      return fail('service account token is not valid yet');
    const wanted = audiences.length > 0 ? audiences : this.apiAudiences;
    const matched = wanted.filter((audience) => claims.aud.includes(audience));
    if (matched.length === 0) {
      return fail(
        `token audiences ${JSON.stringify(claims.aud)} is invalid for the target audiences ${JSON.stringify(wanted)}`,
      );
    }
    const private_ = claims['kubernetes.io'];
    const namespace = private_.namespace;
    const serviceAccount = this.store.get(
      type('serviceaccounts'),
      namespace,
      private_.serviceaccount.name,
    );
    if (serviceAccount === undefined) {
      return fail(`service account ${namespace}/${private_.serviceaccount.name} has been deleted`);
    }
    if (serviceAccount.metadata.uid !== private_.serviceaccount.uid) {
      return fail(
        `service account UID (${serviceAccount.metadata.uid ?? ''}) does not match claim (${private_.serviceaccount.uid})`,
      );
    }
    const extra: Record<string, string[]> = {};
    if (private_.pod !== undefined) {
      const pod = this.store.get(type('pods'), namespace, private_.pod.name);
      if (pod === undefined) return fail('service account token has been invalidated');
      if (pod.metadata.uid !== private_.pod.uid) {
        return fail(
          `pod UID (${pod.metadata.uid ?? ''}) does not match service account pod ref claim (${private_.pod.uid})`,
        );
      }
      const deletion = pod.metadata.deletionTimestamp;
      if (
        deletion !== undefined &&
        Date.parse(deletion) / 1000 + DELETED_POD_TOKEN_GRACE_SECONDS < now
      ) {
        return fail('service account token has been invalidated');
      }
      extra['authentication.kubernetes.io/pod-name'] = [private_.pod.name];
      extra['authentication.kubernetes.io/pod-uid'] = [private_.pod.uid];
    }
    if (private_.secret !== undefined) {
      const secret = this.store.get(type('secrets'), namespace, private_.secret.name);
      if (secret === undefined) return fail('service account token has been invalidated');
      if (secret.metadata.uid !== private_.secret.uid) {
        return fail(
          `secret UID (${secret.metadata.uid ?? ''}) does not match service account secret ref claim (${private_.secret.uid})`,
        );
      }
    }
    if (private_.node !== undefined) {
      extra['authentication.kubernetes.io/node-name'] = [private_.node.name];
      extra['authentication.kubernetes.io/node-uid'] = [private_.node.uid];
    }
    extra['authentication.kubernetes.io/credential-id'] = [`JTI=${claims.jti}`];
    return {
      authenticated: true,
      audiences: matched,
      claims,
      user: {
        username: claims.sub,
        uid: private_.serviceaccount.uid,
        groups: [
          'system:serviceaccounts',
          `system:serviceaccounts:${namespace}`,
          'system:authenticated',
        ],
        extra,
      },
    };
  }

  /** The JWKS document of the issuer's public key (served at /openid/v1/jwks). */
  jwks() {
    return {
      keys: [
        { ...this.publicKey.export({ format: 'jwk' }), kid: this.keyId, use: 'sig', alg: 'RS256' },
      ],
    };
  }

  private verifySignature(token: string): TokenClaims | undefined {
    const parts = token.split('.');
    if (parts.length !== 3) return undefined;
    const [header, payload, signature] = parts as [string, string, string];
    try {
      const decodedHeader = JSON.parse(Buffer.from(header, 'base64url').toString()) as {
        alg?: string;
      };
      if (decodedHeader.alg !== 'RS256') return undefined;
      const valid = verify(
        'sha256',
        Buffer.from(`${header}.${payload}`),
        this.publicKey,
        Buffer.from(signature, 'base64url'),
      );
      if (!valid) return undefined;
      const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as TokenClaims;
      if (claims.iss !== this.issuer || typeof claims.exp !== 'number') return undefined;
      return claims;
    } catch {
      return undefined;
    }
  }
}
