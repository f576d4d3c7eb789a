/**
 * Keys and channels of the fair mode (README.md here), each in the same Cluster slot as its
 * resource's lock key: built like the writer-waiting flag (base/keys.ts `namespacedKey`, whose list of
 * namespaces the key prefix check reads), so the hash-tag rule lives in base/keys.ts only.
 */
import { namespacedKey } from '../base/keys';

/**
 * Redis key of the poll mark of a resource (same Cluster slot as its lock key): a plain lock
 * that will retry and is refused by another plain lock raises it for one retry interval, so the
 * holder's process learns that someone polls for the resource (fair/acquire-script.ts, FAIR_ACQUIRE_SCRIPT;
 * fair/streak.ts). Unlike the writer-waiting flag it holds back no one: readers ignore it.
 */
export function pollKey(prefix: string, resource: string): string {
  return namespacedKey(prefix, 'poll:', resource);
}

/**
 * Redis key of the order of a resource (same Cluster slot as its lock key): a sorted set of the
 * engines waiting for it, scored by when each began to wait, and the reservation a yield leaves
 * for the one that waited longest (fair/release-script.ts; fair/streak.ts, "Ordered yields").
 */
export function orderKey(prefix: string, resource: string): string {
  return namespacedKey(prefix, 'order:', resource);
}

/**
 * Redis key of the parked tokens of a resource (same Cluster slot as its lock key): a hash of
 * engine id → `<token> <ttl> <until ms>`, the next token of each waiting engine, which a yield
 * that names the engine installs (fair/release-script.ts, fair/install-scripts.ts).
 */
export function parkKey(prefix: string, resource: string): string {
  return namespacedKey(prefix, 'park:', resource);
}

/**
 * Pub/sub channel (not a key) on which an engine's subscriber connections stay subscribed while
 * they are up: a yield or a pass installs a waiting engine's parked token only while that
 * engine's channel has a subscriber on the master (fair/install-scripts.ts): a waiting process that
 * died (its connections closed) is skipped instead of being given the lock for its whole ttl.
 * Lock keys never take this form (after the prefix they start with their `{` tag).
 */
export function aliveChannel(prefix: string, engineId: string): string {
  return `${prefix}alive:${engineId}`;
}
