import type { FoundLockKind } from '../core/base/errors';
import type { LockKindSpec } from '../core/base/kind-spec';
import type { Grant } from '../core/store';

/**
 * The lock kinds of the in-memory store (in-memory-store.ts), with the rules of the Redis scripts
 * (docs/lock-kinds.md) on its one simulated master: one slot per resource holding a plain lock
 * (one holder), shared readers or semaphore holders; a plain lock refused by readers raises the
 * writer-waiting flag that holds back new readers; kinds never mix.
 */

/** One holder of a resource. */
export interface Holding {
  readonly token: string;
  /** Monotonic ms at which it would expire in Redis; `Infinity` for an open-ended hold. */
  expiresAt: number;
  readonly grant?: Grant;
}

/** What a resource holds. */
export interface Slot {
  kind: LockKindSpec;
  readonly holders: Map<string, Holding>;
  /** Shared locks: new readers are refused until then (monotonic ms; writer policy). */
  writerWaitUntil: number;
}

/** How one resource answers a request of `kind`. */
export type Admission =
  | { readonly status: 'admit' }
  | { readonly status: 'held'; readonly ttl: number }
  | { readonly status: 'mismatch'; readonly found: FoundLockKind };

/** Drops the expired holders of a slot; returns how many are left. */
export function pruneSlot(slot: Slot, now: number): number {
  for (const [token, h] of slot.holders) if (h.expiresAt <= now) slot.holders.delete(token);
  return slot.holders.size;
}

/**
 * Whether `slot` (pruned; `undefined` = free) admits a new holder of `kind`. `writerWait` > 0: a
 * plain lock refused by readers raises their writer-waiting flag until the readers expire plus that
 * long (the writer sleeps until then, or until a reader leaves).
 */
export function admission(
  slot: Slot | undefined,
  kind: LockKindSpec,
  now: number,
  writerWait: number,
): Admission {
  if (!slot || slot.holders.size === 0) {
    if (kind.name === 'shared' && slot && slot.writerWaitUntil > now) {
      return { status: 'held', ttl: slot.writerWaitUntil - now };
    }
    return { status: 'admit' };
  }
  const held = slot.kind;
  // Holds made with `hold()` stand for "someone else" of whatever kind: contention, not a mismatch.
  const external = [...slot.holders.values()].every((h) => !h.grant);
  const last = Math.max(...[...slot.holders.values()].map((h) => h.expiresAt));
  const ttl = Number.isFinite(last) ? Math.ceil(last - now) : Infinity;
  if (external) return { status: 'held', ttl };
  if (kind.name === 'semaphore' || held.name === 'semaphore') {
    if (held.name !== kind.name || held.limit !== kind.limit) {
      return { status: 'mismatch', found: foundOf(held) };
    }
    if (slot.holders.size < (kind.limit as number)) return { status: 'admit' };
    const first = Math.min(...[...slot.holders.values()].map((h) => h.expiresAt));
    return { status: 'held', ttl: Number.isFinite(first) ? Math.ceil(first - now) : Infinity };
  }
  if (kind.name === 'shared' && held.name === 'shared') {
    if (slot.writerWaitUntil > now) return { status: 'held', ttl: slot.writerWaitUntil - now };
    return { status: 'admit' };
  }
  if (kind.name === 'mutex' && held.name === 'shared' && writerWait > 0) {
    // Until the readers expire plus one retry interval (as the Redis script does).
    const until = Number.isFinite(last) ? Math.max(last, now) + writerWait : now + writerWait;
    slot.writerWaitUntil = Math.max(slot.writerWaitUntil, until);
  }
  return { status: 'held', ttl };
}

function foundOf(kind: LockKindSpec): FoundLockKind {
  return kind.name === 'semaphore'
    ? { kind: 'semaphore', limit: kind.limit as number }
    : { kind: kind.name };
}
