/** Why the token could not be read; `empty` is what a standby agent waits out. */
export type TokenReadReason = 'empty' | 'unreadable' | 'invalid';

export class TokenReadError extends Error {
  constructor(
    message: string,
    readonly reason: TokenReadReason = 'invalid',
  ) {
    super(message);
    this.name = 'TokenReadError';
  }
}
