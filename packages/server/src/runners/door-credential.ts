import { randomUUID } from 'node:crypto';
import type { Clock } from '@leoflow/core';
import { jwtVerify, SignJWT } from 'jose';
import {
  SIGNING_ALG,
  type SigningKeyring,
  type VerificationKeyring,
} from '../auth/signing-keys.js';

/** The audience (and issuer) of the door's own credential; no other token verifies as it. */
export const DOOR_AUDIENCE = 'leoflow-door';
/** Minted per cell call, so a minute covers any clock skew and nothing more. */
export const DOOR_CREDENTIAL_TTL_SECONDS = 60;

/**
 * The door's signed credential towards cells: an EdDSA JWT from the door's own keyring
 * (`<door data dir>/keys/door-signing-keys.json`), one per cell call. Cells trust the door's
 * public keys only (door-public.jwks.json), so a cell never holds anything that mints it.
 */
export class DoorCredentialIssuer {
  constructor(
    private readonly keys: SigningKeyring,
    private readonly clock: Clock,
  ) {}

  async mint(runner_id: string): Promise<string> {
    const key = this.keys.current();
    const now = Math.floor(this.clock.now() / 1000);
    return new SignJWT({ runner_id })
      .setProtectedHeader({ alg: SIGNING_ALG, kid: key.kid, typ: 'JWT' })
      .setIssuer(DOOR_AUDIENCE)
      .setAudience(DOOR_AUDIENCE)
      .setSubject('door')
      .setIssuedAt(now)
      .setExpirationTime(now + DOOR_CREDENTIAL_TTL_SECONDS)
      .setJti(randomUUID())
      .sign(key.privateKey);
  }
}

/** The cell's check of a door credential: signature by a trusted door key, audience, expiry. */
export class DoorCredentialVerifier {
  constructor(
    private readonly keys: VerificationKeyring,
    private readonly clock: Clock,
  ) {}

  /** The runner id the door asked for, or undefined when the credential does not verify. */
  async verify(token: string): Promise<{ runner_id: string } | undefined> {
    try {
      const { payload } = await jwtVerify(
        token,
        (header) => {
          const key = header.kid === undefined ? undefined : this.keys.verificationKey(header.kid);
          if (!key) throw new Error('unknown kid');
          return key;
        },
        {
          algorithms: [SIGNING_ALG],
          audience: DOOR_AUDIENCE,
          issuer: DOOR_AUDIENCE,
          currentDate: new Date(this.clock.now()),
          clockTolerance: 5,
          requiredClaims: ['exp', 'iat', 'jti'],
        },
      );
      const runner_id = payload.runner_id;
      return typeof runner_id === 'string' && runner_id !== '' ? { runner_id } : undefined;
    } catch {
      return undefined;
    }
  }
}
