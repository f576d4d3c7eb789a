/**
 * Helpers to run the lock-kind scripts (lib/core/kinds) directly with EVAL on one client, with
 * the key and argument layout the engine will use.
 */
import type { Cluster, Redis } from 'ioredis';
import { fenceKey, lockKey, waitKey } from '../../lib/core/base/keys';
import { acquireLayout as engineLayout } from '../../lib/core/redis/kinds/mutex';
import type { LuaScript } from '../../lib/core/redis/scripts/lua';

export const PREFIX = 'kinds:';
export const FENCE_TTL = 60_000;

export type Client = Redis | Cluster;

/** EVAL of `s` (always the full source, so the test never depends on a script cache). */
export function run(c: Client, s: LuaScript, keys: string[], args: string[]): Promise<unknown> {
  return c.eval(s.source, keys.length, ...keys, ...args);
}

/** The lock key of `resource` under the test prefix. */
export function key(resource: string): string {
  return lockKey(PREFIX, resource);
}

/** The writer-waiting flag of `resource` under the test prefix. */
export function wkey(resource: string): string {
  return waitKey(PREFIX, resource);
}

export interface AcquireCall {
  readonly token: string;
  readonly ttl: number;
  readonly fencing?: boolean;
  /** Boot marker key (the marker flag is set when given). */
  readonly marker?: string;
}

/**
 * KEYS and the first six ARGV of an acquire script, as the engine lays them out
 * (redis/kinds/mutex.ts `acquireLayout`: lock keys, fencing counters when fencing, writer-waiting flags
 * when `wait`, the boot marker when given).
 */
export function acquireLayout(
  resources: string[],
  call: AcquireCall,
  wait: boolean,
): { keys: string[]; args: string[] } {
  const { keys, args } = engineLayout(
    {
      token: call.token,
      ttl: call.ttl,
      keys: resources.map(key),
      fenceKeys: call.fencing ? resources.map((r) => fenceKey(PREFIX, r)) : undefined,
      marker: call.marker,
      fenceTtl: FENCE_TTL,
    },
    wait ? resources.map(wkey) : undefined,
    [],
  );
  return { keys: [...keys], args };
}

/**
 * DUMP and absolute expiry (PEXPIRETIME, Redis 7+; -2 missing, -1 no TTL) of each key: the state
 * a read-only script must leave untouched. Unlike PTTL it does not change while time passes.
 */
export async function snapshot(c: Redis, keys: string[]): Promise<[string | null, unknown][]> {
  return Promise.all(
    keys.map(async (k) => {
      const dump = await c.dumpBuffer(k);
      const expireAt = await c.call('PEXPIRETIME', k);
      return [dump ? dump.toString('base64') : null, expireAt] as [string | null, unknown];
    }),
  );
}
