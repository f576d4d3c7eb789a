import { createHash } from 'node:crypto';
import { keySlot, slotTag } from './slot';

/**
 * Redis key formats of the engine — the one place they are defined.
 *
 * - lock key of resource `r`:   `${prefix}{r}`
 * - fencing counter of `r`:     `${prefix}fence:{t}`, `t` the tag of the lock key's Cluster slot
 * - boot marker:                `${prefix}boot`
 * - run id beside the marker:    `${prefix}boot:run` (the master process that seeded the marker)
 *
 * The `{...}` hash tag puts a resource's lock key and fencing counter in the same Redis Cluster
 * slot, so one script can use both. Redis takes the tag from the first `{` to the first `}`
 * after it; the prefix has no braces, so the first `{` is ours, and for a resource without `}`
 * the tag is exactly the resource. A resource that contains `}` would cut the tag short (or make
 * it empty, e.g. `'}a'`, and then the lock key and the counter would land in different slots:
 * CROSSSLOT). Such a resource gets a tag derived from it instead, followed by the resource
 * itself: `${prefix}{<tag>}r`, where `<tag>` is 16 hex digits of SHA-1(r).
 *
 * **One fencing counter per slot, not per resource.** Every resource whose lock key is in slot
 * `s` shares the counter `${prefix}fence:{slotTag(s)}` (slot.ts: the first base-36 number whose
 * slot is `s`), so the counters on a master are at most 16,384 per prefix, however many
 * resources are locked — before, every distinct resource left a counter for `fencingKeyTtl`.
 * A shared counter still only grows, so the tokens of each resource still strictly increase
 * (quorum/fencing-tokens.ts); they grow by more than one when other resources of the slot are
 * locked in between.
 *
 * Within one prefix, lock keys are injective: a key of the first form has exactly one `}`, at
 * its end; a key of the hashed form has at least two (one ends the tag, one is in `r`), and `r`
 * is everything after the first `}`. Lock keys (`{` right after the prefix), counters (`fence:`)
 * and the marker (`boot`, `boot:run`) never share a key.
 *
 * Across prefixes (two engines on the same masters), for any two prefixes that
 * `checkKeyPrefix` accepts (no braces; see validate.ts), no key of one is a key of the other
 * unless the prefixes are equal:
 *
 * - Lock keys and counters contain a `{`; markers and run ids do not (the prefix has no braces,
 *   `boot` and `boot:run` neither). So a resource key never equals a marker or run-id key.
 * - For a resource key, the text before its first `{` is the prefix (lock key) or the prefix
 *   followed by `fence:` (counter), and the rest is `tagged(r)` (determines `r`) or a slot tag.
 *   So lock(P, r) = lock(Q, s) only when P = Q and r = s, fence(P, r) = fence(Q, s) only when
 *   P = Q, and lock(P, r) = fence(Q, s) only when P = Q + `fence:` — the one case
 *   `checkKeyPrefix` refuses (a prefix ending with `fence:` after a separator, e.g. `lock:fence:`
 *   beside `lock:`; the bare prefix `fence:` stays allowed, since Q would be empty, which is
 *   refused).
 * - P + `boot` = Q + `boot` only when P = Q; P + `boot` ≠ Q + `boot:run` (one ends with `boot`,
 *   the other with `run`); P + `boot:run` = Q + `boot:run` only when P = Q.
 *
 * Hand-off channels are named like the lock keys, so the same argument holds for them.
 */

/** The text between the prefix and the hash tag in a fencing counter key. */
export const FENCE_KEY_INFIX = 'fence:';

/** The part of a resource's lock key after the prefix (its hash tag, then the resource when hashed). */
function tagged(resource: string): string {
  if (!resource.includes('}')) return `{${resource}}`;
  const tag = createHash('sha1').update(resource, 'utf8').digest('hex').slice(0, 16);
  return `{${tag}}${resource}`;
}

/** Redis key of a resource's lock. */
export function lockKey(prefix: string, resource: string): string {
  return `${prefix}${tagged(resource)}`;
}

/**
 * Redis key of the fencing counter that serves a resource: the counter of its lock key's Cluster
 * slot, shared by every resource of that slot (see the top of this file).
 */
export function fenceKey(prefix: string, resource: string): string {
  return counterKeyOf(prefix, lockKey(prefix, resource));
}

/** {@link fenceKey} from the resource's lock key, when it is already built (the acquire path). */
export function counterKeyOf(prefix: string, lock: string): string {
  return `${prefix}${FENCE_KEY_INFIX}{${slotTag(keySlot(lock))}}`;
}

/** Redis key of the boot marker (restart quarantine). */
export function markerKey(prefix: string): string {
  return `${prefix}boot`;
}

/** Redis key of the run id recorded beside a boot marker key (exact restart detection). */
export function markerRunKey(marker: string): string {
  return `${marker}:run`;
}
