import { createHash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { InvalidArgumentError } from './errors';
import { isWellFormed } from './validate';

const FENCED_WRITE = `
local cur = tonumber(redis.call('HGET', KEYS[1], 'fencingToken'))
if cur and cur >= tonumber(ARGV[1]) then
  return 0
end
redis.call('HSET', KEYS[1], 'fencingToken', ARGV[1], 'value', ARGV[2])
return 1
`;
const FENCED_WRITE_SHA = createHash('sha1').update(FENCED_WRITE).digest('hex');

/**
 * Enforces fencing at a protected Redis resource: stores `value` under `key` only if
 * `fencingToken` is newer than the token of the last accepted write (kept next to the value in a
 * hash: fields `value` and `fencingToken`). Returns `true` when written, `false` when a holder
 * with a newer token already wrote — i.e. this caller's lock was lost, and its write is refused.
 *
 * The store may be any Redis (it need not be one of the lock masters).
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
  client: Redis | Cluster,
  key: string,
  fencingToken: number,
  value: string | Buffer,
): Promise<boolean> {
  checkKey(key);
  if (!Number.isSafeInteger(fencingToken) || fencingToken < 0) {
    throw new InvalidArgumentError('fencingToken', 'must be a non-negative safe integer');
  }
  const args = [key, String(fencingToken), value] as const;
  let reply: unknown;
  try {
    reply = await client.evalsha(FENCED_WRITE_SHA, 1, ...args);
  } catch (err) {
    if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
    reply = await client.eval(FENCED_WRITE, 1, ...args);
  }
  return reply === 1;
}

/** Reads what {@link fencedWrite} stored: the value and the fencing token that wrote it. */
export async function fencedRead(
  client: Redis | Cluster,
  key: string,
): Promise<{ value: string; fencingToken: number } | null> {
  checkKey(key);
  const [value, token] = await client.hmget(key, 'value', 'fencingToken');
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
