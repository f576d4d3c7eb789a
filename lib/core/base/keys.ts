import { createHash } from 'node:crypto';

/**
 * Redis key formats of the engine — the one place they are defined.
 *
 * - lock key of resource `r`:   `${prefix}{r}`
 * - fencing counter of `r`:     `${prefix}fence:{t}`, `t` the tag of the lock key's Cluster slot
 * - writer-waiting flag of `r`: `${prefix}wait:{r}` (shared locks' writer policy, below)
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
 * **One fencing counter per slot, not per resource.** Every resource whose lock key is in slot `s`
 * shares the counter `${prefix}fence:{slotTag(s)}` ({@link slotTag}: the first base-36 number whose
 * slot is `s`), so the counters on a master are at most 16,384 per prefix, however many resources
 * are locked — before, every distinct resource left a counter for `fencingKeyTtl`. A shared counter
 * still only grows, so the tokens of each resource still strictly increase (quorum/protocol.ts
 * `fencingTokensOf`); they grow by more than one when other resources of the slot are locked in
 * between.
 *
 * Within one prefix, lock keys are injective: a key of the first form has exactly one `}`, at
 * its end; a key of the hashed form has at least two (one ends the tag, one is in `r`), and `r`
 * is everything after the first `}`. Lock keys (`{` right after the prefix), counters (`fence:`)
 * the writer-waiting flags (`wait:`) and the marker (`boot`, `boot:run`) never share a key.
 *
 * Across prefixes (two engines on the same masters), for any two prefixes that
 * `checkKeyPrefix` accepts (no braces; see base/validate.ts), no key of one is a key of the other
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
 * - The writer-waiting flags and the fair mode's keys are `P + infix + tagged(r)` for an infix of
 *   {@link RESOURCE_KEY_INFIXES}: they equal a lock key of Q only when Q = P + infix (refused,
 *   as above), and a key of another namespace or prefix only when prefix, infix and resource
 *   are the same (no infix ends with another, and none starts with `{`).
 * - P + `boot` = Q + `boot` only when P = Q; P + `boot` ≠ Q + `boot:run` (one ends with `boot`,
 *   the other with `run`); P + `boot:run` = Q + `boot:run` only when P = Q.
 *
 * Hand-off channels are named like the lock keys, so the same argument holds for them.
 */

/** The text between the prefix and the hash tag in a fencing counter key. */
export const FENCE_KEY_INFIX = 'fence:';

/**
 * Every namespace after the prefix whose keys end like lock keys (`{tag}…`): the fencing
 * counters, the writer-waiting flags and the fair mode's per-resource keys (fair/fair-keys.ts).
 * A prefix `P + infix` beside a prefix `P` would name its lock keys exactly like `P`'s keys of
 * that namespace, so `checkKeyPrefix` (base/validate.ts) refuses a prefix that ends with one of them
 * after a separator. The per-resource keys of these namespaces (all but the counters, one per
 * slot: {@link counterKeyOf}) are built with {@link namespacedKey} only, whose infix must be one
 * of this list: a new namespace cannot be added without it.
 */
export const RESOURCE_KEY_INFIXES = [FENCE_KEY_INFIX, 'wait:', 'poll:', 'order:', 'park:'] as const;

/** One of {@link RESOURCE_KEY_INFIXES}. */
export type ResourceKeyInfix = (typeof RESOURCE_KEY_INFIXES)[number];

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

/**
 * The writer-waiting flag of a resource (shared locks' writer policy, docs/lock-kinds.md "Key
 * layout"): `${prefix}wait:` followed by exactly the lock key's part after the prefix, so the flag
 * has the same `{hash tag}` and lands in the same Cluster slot as the lock key and its slot's
 * fencing counter. Derived from {@link lockKey}, so the hash-tag rule for resources containing
 * `}` stays in one place. The fair mode's keys are built the same way (fair/fair-keys.ts).
 */
export function waitKey(prefix: string, resource: string): string {
  return namespacedKey(prefix, 'wait:', resource);
}

/**
 * The key of `resource` in the namespace `infix` (one of {@link RESOURCE_KEY_INFIXES}): the
 * infix, then exactly the lock key's part after the prefix — the same `{hash tag}`, so the same
 * Cluster slot as the lock key.
 */
export function namespacedKey(prefix: string, infix: ResourceKeyInfix, resource: string): string {
  return `${prefix}${infix}${lockKey(prefix, resource).slice(prefix.length)}`;
}

// Redis Cluster hash slots (CRC16-XMODEM of the key's `{hash tag}`, mod 16384), and one short
// hash tag per slot: the fencing counters are one per slot ({@link fenceKey}), named with the
// tag of their slot so that a counter shares the slot of every lock key it serves.

/** Number of Redis Cluster hash slots. */
export const SLOTS = 16384;

/** CRC16-XMODEM lookup table, as used by Redis Cluster for key slots. */
const TABLE = (() => {
  const t = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let b = 0; b < 8; b++)
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    t[i] = crc;
  }
  return t;
})();

/** CRC16-XMODEM of the UTF-8 bytes of `text[start, end)` (no Buffer for ASCII text). */
function crc16(text: string, start: number, end: number): number {
  let crc = 0;
  for (let i = start; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x80) return crc16Bytes(Buffer.from(text.slice(start, end), 'utf8'));
    crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ c) & 0xff];
  }
  return crc;
}

function crc16Bytes(data: Buffer): number {
  let crc = 0;
  for (const byte of data) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ byte) & 0xff];
  return crc;
}

/** Redis Cluster hash slot of a key (honours `{hash tags}` as Redis does). */
export function keySlot(key: string): number {
  const open = key.indexOf('{');
  if (open !== -1) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) return crc16(key, open + 1, close) % SLOTS;
  }
  return crc16(key, 0, key.length) % SLOTS;
}

const DIGITS = '0123456789abcdefghijklmnopqrstuvwxyz';

let tags: string[] | undefined;

/** Fills `t` (slot → tag) with the tags of `length` base-36 digits, no leading zero but '0'. */
function fillTags(t: string[], length: number, left: number): number {
  const walk = (text: string, crc: number, depth: number): void => {
    for (let d = depth === 0 && length > 1 ? 1 : 0; d < 36 && left > 0; d++) {
      const c = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ DIGITS.charCodeAt(d)) & 0xff];
      if (depth + 1 < length) {
        walk(text + DIGITS[d], c, depth + 1);
      } else if (t[c % SLOTS] === undefined) {
        t[c % SLOTS] = text + DIGITS[d];
        left--;
      }
    }
  };
  walk('', 0, 0);
  return left;
}

/**
 * The hash tag of `slot`: the first of `'0'`, `'1'`, …, `'z'`, `'10'`, … (base 36, in counting
 * order) whose slot it is — the same for every engine and version, so engines on the same masters
 * share the counter of a slot. The table of all 16,384 tags (1 to 4 characters) is made on first
 * use, once per process (walking base-36 numbers with their CRC16 built digit by digit).
 */
export function slotTag(slot: number): string {
  if (!tags) {
    const t = new Array<string>(SLOTS);
    let left = SLOTS;
    for (let length = 1; left > 0; length++) left = fillTags(t, length, left);
    tags = t;
  }
  return tags[slot];
}
