/**
 * Keys of the lock kinds (design: docs/lock-kinds.md, "Key layout"). The lock key itself is
 * `lockKey(prefix, resource)` for every kind; only the Redis type stored there differs (a string
 * for the mutex / writer, a zset of holders for readers and semaphores).
 *
 * Two extra keys per resource, the "writer waiting" flag of shared locks and the poll mark of
 * plain locks (`${prefix}poll:<tagged resource>`, {@link pollKey}, built the same way):
 *
 * - `${prefix}wait:<tagged resource>`: the part after the prefix is exactly the lock key's, so the
 *   flag has the same `{hash tag}` and lands in the same Cluster slot as the lock key and its
 *   slot's fencing counter (`${prefix}fence:{<slot tag>}`). It is derived from `lockKey()`, so the
 *   hash-tag rule for resources containing `}` lives in keys.ts only. Distinct from every other
 *   key: lock keys have `{` right after the prefix, counters `fence:`, the marker `boot`.
 *
 * keys.ts is not changed while the engine is split; this function can move there afterwards.
 */
import { fenceKey, lockKey } from '../keys';

/** Redis key of the "writer waiting" flag of a resource (same Cluster slot as its lock key). */
export function waitKey(prefix: string, resource: string): string {
  return `${prefix}wait:${lockKey(prefix, resource).slice(prefix.length)}`;
}

/**
 * Redis key of the poll mark of a resource (same Cluster slot as its lock key): a plain lock
 * that will retry and is refused by another plain lock raises it for one retry interval, so the
 * holder's process learns that someone polls for the resource (kinds/mutex-scripts.ts, FAIR_ACQUIRE_SCRIPT;
 * fair/streak.ts). Unlike the writer-waiting flag it holds back no one: readers ignore it.
 */
export function pollKey(prefix: string, resource: string): string {
  return `${prefix}poll:${lockKey(prefix, resource).slice(prefix.length)}`;
}

/**
 * Redis key of the order of a resource (same Cluster slot as its lock key): a sorted set of the
 * engines waiting for it, scored by when each began to wait, and the reservation a yield leaves
 * for the one that waited longest (kinds/mutex-scripts.ts; fair/streak.ts, "Ordered yields").
 */
export function orderKey(prefix: string, resource: string): string {
  return `${prefix}order:${lockKey(prefix, resource).slice(prefix.length)}`;
}

/**
 * Redis key of the parked tokens of a resource (same Cluster slot as its lock key): a hash of
 * engine id → `<token> <ttl> <until ms>`, the next token of each waiting engine, which a yield
 * that names the engine installs (kinds/mutex-scripts.ts; hand-over across processes).
 */
export function parkKey(prefix: string, resource: string): string {
  return `${prefix}park:${lockKey(prefix, resource).slice(prefix.length)}`;
}

/**
 * Pub/sub channel (not a key) on which an engine's subscriber connections stay subscribed while
 * they are up: a yield or a pass installs a waiting engine's parked token only while that
 * engine's channel has a subscriber on the master (scripts/install.ts): a waiting process that
 * died (its connections closed) is skipped instead of being given the lock for its whole ttl.
 * Lock keys never take this form (after the prefix they start with their `{` tag).
 */
export function aliveChannel(prefix: string, engineId: string): string {
  return `${prefix}alive:${engineId}`;
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
