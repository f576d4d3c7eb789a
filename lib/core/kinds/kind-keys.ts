/**
 * Keys of the lock kinds (design: docs/lock-kinds.md, "Key layout"). The lock key itself is
 * `lockKey(prefix, resource)` for every kind; only the Redis type stored there differs (a string
 * for the mutex / writer, a zset of holders for readers and semaphores).
 *
 * One extra key per resource, the "writer waiting" flag of shared locks,
 * `${prefix}wait:<tagged resource>`: the part after the prefix is exactly the lock key's, so the
 * flag has the same `{hash tag}` and lands in the same Cluster slot as the lock key and its
 * slot's fencing counter (`${prefix}fence:{<slot tag>}`). It is derived from `lockKey()`, so the
 * hash-tag rule for resources containing `}` lives in keys.ts only. Distinct from every other
 * key: lock keys have `{` right after the prefix, counters `fence:`, the marker `boot`.
 * The fair mode's keys are built the same way (fair/fair-keys.ts).
 */
import { fenceKey, lockKey } from '../keys';

/** Redis key of the "writer waiting" flag of a resource (same Cluster slot as its lock key). */
export function waitKey(prefix: string, resource: string): string {
  return `${prefix}wait:${lockKey(prefix, resource).slice(prefix.length)}`;
}

/** What an acquire script needs besides the lock keys. */
export interface AcquireKeyOptions {
  /** Fencing counters (ARGV[3] = '1'). */
  readonly fencing: boolean;
  /** Writer-waiting flags (the shared-lock reader and writer scripts). */
  readonly wait: boolean;
  /** Boot marker key, when the master's marker is checked (ARGV[4] = '1'). */
  readonly marker?: string;
}

/**
 * KEYS of an acquire script for `resources` (one Cluster slot group at most):
 * lock keys, then fencing counters (when fencing), then writer-waiting flags (when `wait`),
 * then the boot marker (when given) — the order of ACQUIRE_SCRIPT with the flags inserted before
 * the marker, so that `KEYS[n + i]` is still the i-th counter and `KEYS[#KEYS]` the marker.
 */
export function acquireKeys(
  prefix: string,
  resources: readonly string[],
  options: AcquireKeyOptions,
): string[] {
  const keys = resources.map((r) => lockKey(prefix, r));
  if (options.fencing) keys.push(...resources.map((r) => fenceKey(prefix, r)));
  if (options.wait) keys.push(...resources.map((r) => waitKey(prefix, r)));
  if (options.marker !== undefined) keys.push(options.marker);
  return keys;
}
