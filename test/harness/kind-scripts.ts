/**
 * Helpers to run the lock-kind scripts (lib/core/kinds) directly with EVAL on one client, with
 * the key and argument layout the engine will use.
 */
import type { Cluster, Redis } from 'ioredis';
import { fenceKey, lockKey, waitKey } from '../../lib/core/keys';
import type { LuaScript } from '../../lib/core/scripts/lua';

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
 * KEYS of an acquire script for `resources` (one Cluster slot group at most): lock keys, then
 * fencing counters (when fencing), then writer-waiting flags (when `wait`), then the boot marker
 * (when given) — ACQUIRE_SCRIPT's order with the flags before the marker, so that `KEYS[n + i]`
 * is still the i-th counter and `KEYS[#KEYS]` the marker (kinds/mutex.ts `acquireLayout` builds
 * the same layout for the engine).
 */
function acquireKeys(
  resources: string[],
  options: { fencing: boolean; wait: boolean; marker?: string },
): string[] {
  const keys = resources.map((r) => lockKey(PREFIX, r));
  if (options.fencing) keys.push(...resources.map((r) => fenceKey(PREFIX, r)));
  if (options.wait) keys.push(...resources.map((r) => waitKey(PREFIX, r)));
  if (options.marker !== undefined) keys.push(options.marker);
  return keys;
}

/** KEYS and the first six ARGV of an acquire script, as ACQUIRE_SCRIPT takes them. */
export function acquireLayout(
  resources: string[],
  call: AcquireCall,
  wait: boolean,
): { keys: string[]; args: string[] } {
  const fencing = call.fencing ?? false;
  return {
    keys: acquireKeys(resources, { fencing, wait, marker: call.marker }),
    args: [
      call.token,
      String(call.ttl),
      fencing ? '1' : '0',
      call.marker !== undefined ? '1' : '0',
      String(resources.length),
      String(FENCE_TTL),
    ],
  };
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
