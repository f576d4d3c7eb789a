import { connectionOf } from './connection/adapt';
import type { RedlockClient } from '../base/client-types';
import { InvalidArgumentError } from '../base/errors';
import { evalScript } from './scripts/lua';
import { FENCED_WRITE_SCRIPT } from './scripts/fencing';
import { isWellFormed } from '../base/validate';

/**
 * Enforces fencing at a protected Redis resource: stores `value` under `key` only if
 * `fencingToken` is newer than the token of the last accepted write (kept next to the value in a
 * hash: fields `value` and `fencingToken`). Returns `true` when written, `false` when a holder
 * with a newer token already wrote — i.e. this caller's lock was lost, and its write is refused.
 *
 * The store may be any Redis (it need not be one of the lock masters), through any client the
 * engine takes (ioredis, iovalkey, node-redis; standalone or Cluster).
 *
 * @example
 * ```ts
 * await redlock.using('invoice:42', async (signal, lock) => {
 *   const pdf = await render();
 *   if (!(await fencedWrite(store, 'invoice:42:pdf', lock.fencingToken!, pdf))) {
 *     throw new Error('a newer holder already wrote the invoice');
 *   }
 * });
 * ```
 */
export async function fencedWrite(
  client: RedlockClient,
  key: string,
  fencingToken: number,
  value: string | Buffer,
): Promise<boolean> {
  checkKey(key);
  if (!Number.isSafeInteger(fencingToken) || fencingToken < 0) {
    throw new InvalidArgumentError('fencingToken', 'must be a non-negative safe integer');
  }
  const reply = await evalScript(
    connectionOf(client),
    FENCED_WRITE_SCRIPT,
    [key],
    [String(fencingToken), value],
  );
  return reply === 1;
}

/** Reads what {@link fencedWrite} stored: the value and the fencing token that wrote it. */
export async function fencedRead(
  client: RedlockClient,
  key: string,
): Promise<{ value: string; fencingToken: number } | null> {
  checkKey(key);
  const [value, token] = await connectionOf(client).hmget(key, ['value', 'fencingToken']);
  return value === null || token === null ? null : { value, fencingToken: Number(token) };
}

/** A key must be a non-empty, well-formed string (a lone surrogate would alias `'\uFFFD'`). */
function checkKey(key: unknown): void {
  if (typeof key !== 'string' || key.length === 0) {
    throw new InvalidArgumentError('key', 'must be a non-empty string');
  }
  if (!isWellFormed(key)) {
    throw new InvalidArgumentError(
      'key',
      'must be a well-formed string (no lone UTF-16 surrogate)',
    );
  }
}
