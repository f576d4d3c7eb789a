/**
 * Quorum rules of the lock kinds (design note: docs/lock-kinds.md, "Quorum rules").
 * Pure functions, no Redis.
 *
 * ## Counting semaphore with limit n on N masters
 *
 * Every master enforces the limit locally (its script never admits more than n live holders, see
 * redis/kinds/semaphore-scripts.ts). A holder is granted when q masters admitted it. The question is the
 * smallest q for which no n + 1 holders can all be granted at once.
 *
 * **Rule.** q(N, n) is the smallest integer q with (n + 1)·q > n·N, i.e. q > N·n/(n + 1):
 *
 *     q(N, n) = floor(N·n / (n + 1)) + 1
 *
 * For n = 1 this is floor(N/2) + 1, the Redlock majority.
 *
 * **Sufficiency (pigeonhole).** Suppose n + 1 holders are valid at the same moment, each on q
 * masters. Validity means all of a holder's memberships still exist (same argument as the mutex:
 * every grant was made after the attempt started and lives TTL, the holder relies on it only for
 * TTL − elapsed − drift). Count the pairs (holder, master where it is a member): there are
 * (n + 1)·q of them. If every master had at most n holders, there would be at most n·N pairs.
 * With (n + 1)·q > n·N some master holds n + 1 members: impossible, its script refused the last
 * one. So at most n holders are valid at once.
 *
 * **Necessity (construction).** With p = q − 1 votes, (n + 1)·p ≤ n·N (q is the smallest integer
 * above n·N/(n + 1)). Lay the holders' grants end to end around the ring of masters: holder j
 * (j = 0..n) gets masters (j·p + t) mod N for t = 0..p−1 (the cyclic assignment). Each holder's p
 * masters are distinct (p consecutive positions of a ring of N, and p ≤ N − 1 since q ≤ N, see
 * below). Laid consecutively, the (n + 1)·p grants use every master floor((n + 1)·p / N) or
 * ceil((n + 1)·p / N) times, and ceil((n + 1)·p / N) ≤ n because (n + 1)·p ≤ n·N. So each master is used
 * at most n times. Such an execution is real: on each master the assigned
 * holders' requests arrive first (different per-link latencies do exactly this) and are admitted
 * (at most n of them), the rest arrive later. Extra grants only add votes. So n + 1 holders
 * would all be granted with p votes: p is not enough. The example: N = 5, n = 2,
 * p = 3: A on 1,2,3; B on 1,4,5; C on 2,3,4 — no master above 2, three holders (the cyclic
 * assignment gives A 1,2,3; B 4,5,1; C 2,3,4).
 *
 * **Always grantable.** N·n/(n + 1) < N, so q ≤ N for every N ≥ 1, n ≥ 1: any limit can be
 * granted when every master answers. But q = N (no master may be down) as soon as n ≥ N − 1:
 * q = N ⇔ N·n ≥ (N − 1)(n + 1) ⇔ n ≥ N − 1.
 *
 * **Fault tolerance.** Masters that may be down or unreachable while holders are still granted:
 * f = N − q = ceil(N / (n + 1)) − 1 (as N − floor(N·n/(n + 1)) = ceil(N/(n + 1))). With N = 5:
 * n = 1 → 2 masters, n = 2 or 3 → 1 master, n ≥ 4 → none.
 *
 * ## Shared (read) locks
 *
 * Readers share, the writer is the exclusive side (the plain mutex). A reader quorum r and a
 * writer quorum w are safe when r + w > N (a reader and a writer meet on some master, where one
 * Redis key cannot be both a string and a set of readers) and 2·w > N (two writers meet). Readers
 * never exclude each other, so r needs nothing more. We take r = w = floor(N/2) + 1: the smallest
 * symmetric choice, the same fault tolerance as the mutex, and one quorum for every kind but the
 * counting semaphore.
 */
import { InvalidArgumentError } from '../base/errors';

function checkCount(field: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new InvalidArgumentError(field, 'must be a positive safe integer');
  }
}

/** The Redlock majority of `masters`: floor(N/2) + 1. */
export function majorityQuorum(masters: number): number {
  checkCount('masters', masters);
  return Math.floor(masters / 2) + 1;
}

/**
 * Votes a counting-semaphore holder needs on `masters` (N) with `limit` (n): the smallest q with
 * (n + 1)·q > n·N. Equals {@link majorityQuorum} for n = 1. Proof at the top of this file.
 */
export function semaphoreQuorum(masters: number, limit: number): number {
  checkCount('masters', masters);
  checkCount('limit', limit);
  // Integer arithmetic: floor(N·n / (n + 1)) + 1. N·n stays far below 2^53 for sane counts.
  return Math.floor((masters * limit) / (limit + 1)) + 1;
}

/** Masters that may be down or unreachable while a semaphore of `limit` is still granted. */
export function semaphoreFaultTolerance(masters: number, limit: number): number {
  return masters - semaphoreQuorum(masters, limit);
}

/**
 * Whether a semaphore of `limit` can be granted at all on `masters`: q ≤ N. True for every valid
 * input (N·n/(n + 1) < N); kept as a named check so that callers state the condition instead of
 * assuming it. Invalid input throws {@link InvalidArgumentError}.
 */
export function isGrantable(masters: number, limit: number): boolean {
  return semaphoreQuorum(masters, limit) <= masters;
}

/**
 * Whether a semaphore of `limit` can be granted while only `reachable` of `masters` answer
 * (reachable ≥ q). A caller can fail fast with "no quorum" instead of trying.
 */
export function canGrantWith(masters: number, limit: number, reachable: number): boolean {
  if (!Number.isSafeInteger(reachable) || reachable < 0 || reachable > masters) {
    throw new InvalidArgumentError('reachable', `must be an integer from 0 to ${masters}`);
  }
  return reachable >= semaphoreQuorum(masters, limit);
}

/** Quorums of a shared lock: readers and writers each need a majority (see above). */
export function sharedQuorums(masters: number): {
  readonly reader: number;
  readonly writer: number;
} {
  const q = majorityQuorum(masters);
  return { reader: q, writer: q };
}

/**
 * Whether reader quorum `reader` and writer quorum `writer` exclude conflicting holders on
 * `masters`: reader + writer > N and 2·writer > N, each at most N.
 */
export function isSafeSharedQuorum(masters: number, reader: number, writer: number): boolean {
  checkCount('masters', masters);
  checkCount('reader', reader);
  checkCount('writer', writer);
  return (
    reader <= masters && writer <= masters && reader + writer > masters && 2 * writer > masters
  );
}
