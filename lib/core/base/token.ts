/**
 * Lock tokens and engine ids. Tokens prove ownership of a lock's keys on each master, so their
 * random part is fresh CSPRNG output for every acquisition; the engine id in front of it only
 * tells the masters which engine a holder belongs to (the fair mode's scripts, lib/core/fair/).
 */
import { randomBytes } from 'node:crypto';

/** Random bytes are drawn from the CSPRNG in blocks; each token uses 20 fresh bytes, once. */
const TOKEN_BYTES = 20;
let pool = Buffer.alloc(0);
let poolOffset = 0;

/**
 * A new lock token: `engine` (the engine's id, {@link newEngineId}; none by default) followed by
 * 160 fresh bits from `crypto.randomBytes`, base64url (27 characters). The id only tells the
 * masters which engine a holder belongs to (the fair mode's scripts, lib/core/fair/); ownership
 * rests on the random part, unique per acquisition.
 */
export function newToken(engine = ''): string {
  if (poolOffset + TOKEN_BYTES > pool.length) {
    pool = randomBytes(TOKEN_BYTES * 256);
    poolOffset = 0;
  }
  const token = pool.toString('base64url', poolOffset, poolOffset + TOKEN_BYTES);
  poolOffset += TOKEN_BYTES;
  return engine + token;
}

/** Characters of a token's random part (20 bytes, base64url). */
const RANDOM_CHARS = 27;

/** Length of an engine id (9 random bytes, base64url): the first characters of its tokens. */
export const ENGINE_ID_LENGTH = 12;

/** The engine id in front of `token` ({@link newToken}); `undefined` for a token without one. */
export function engineOf(token: string): string | undefined {
  return token.length === ENGINE_ID_LENGTH + RANDOM_CHARS
    ? token.slice(0, ENGINE_ID_LENGTH)
    : undefined;
}

/** A new engine id for {@link newToken}: 72 bits from `crypto.randomBytes`, base64url. */
export function newEngineId(): string {
  return randomBytes(9).toString('base64url');
}
