/**
 * Kept queues (fair/fair-queue.ts): how long the queue of a resource outlives its last entry.
 * A queue without entries used to be dropped at once — with its release watch — also while the
 * exclusive holder it had just granted held. With one or two callers per process the queue
 * empties between grants, so the process's next acquire of the resource made a new queue: it
 * attempted against its own holder's keys instead of waiting behind it, and every streak
 * (fair/streak.ts) started from zero — the process never yielded to the others.
 * Efficiency and fairness only: the masters decide who holds a lock.
 */
import { monotonicNow } from '../base/clock';
import type { Lock } from '../lock/lock';
import { holderUntil } from '../waiting/lines';
import type { Line } from './queue-lines';
import type { FairLockStore } from './fair-store';
import type { Timeline } from '../base/clock';

/**
 * How long (ms) the queue of a resource that other engines wait for is kept, with its release
 * watch, after its last local holder ended and nobody here waits ({@link afterHolder}): a caller
 * that takes the lock again and again finds the watch up (no subscription per turn), and its
 * first refused attempt parks its next token (it hears the installs).
 */
export const LINGER_MS = 250;

/** The local queue's parts that keeping and dropping its lines touches. */
export interface LineTable {
  readonly lines: Map<string, Line>;
  readonly timeline: Timeline;
  /** Plain locks that other engines waited for when granted (fair-queue.ts `passes`). */
  readonly passes: { has(lock: Lock): boolean };
  readonly store: FairLockStore;
}

/**
 * `line` has no entries left: keeps it while the exclusive holder it granted holds, when its
 * resource was contended (it has a release watch) — the next local acquire then queues behind
 * that holder, whose release hands over to it, and the streak counts on — or drops it. A kept
 * line is dropped when the holder ends ({@link afterHolder}), or at its validity end (a lock
 * left to expire).
 */
export function keepOrDrop(t: LineTable, line: Line): void {
  const now = monotonicNow();
  const until = line.watching ? holderUntil(line, now) : -Infinity;
  if (until > now) keepUntil(t, line, until);
  else dropLine(t, line);
}

/**
 * `lock`, the holder `line` was kept for, ended and nobody here waits: when other engines waited
 * for it ({@link LineTable.passes}) the line is kept {@link LINGER_MS} more, with its watch, for
 * this process's next acquire of the resource (its first refused attempt then parks a token and
 * sleeps until its turn: lib/core/fair/README.md); otherwise it is dropped.
 */
export function afterHolder(t: LineTable, line: Line, lock: Lock): void {
  if (t.passes.has(lock) && line.watching) {
    line.lingering = true;
    keepUntil(t, line, monotonicNow() + LINGER_MS);
  } else {
    dropLine(t, line);
  }
}

/** Drops `line` at `until` (monotonic ms) unless it has entries or a valid holder by then. */
function keepUntil(t: LineTable, line: Line, until: number): void {
  if (line.kept) t.timeline.remove(line.kept);
  line.kept = t.timeline.add(until, () => {
    line.kept = undefined;
    if (line.first || t.lines.get(line.resource) !== line) return;
    if (holderUntil(line, monotonicNow()) === -Infinity) dropLine(t, line);
  });
}

/** Forgets `line` (no entries left, no holder kept): its marks and parks, its watch. */
export function dropLine(t: LineTable, line: Line): void {
  if (line.kept) t.timeline.remove(line.kept);
  line.kept = undefined;
  line.lingering = false;
  t.lines.delete(line.resource);
  // Also with a live watch: on a Cluster of several nodes other engines read the mark, and a
  // deferring one would poll until it expired. (Queues rarely end under contention.) (And its
  // parked tokens, which nobody here would hear installed once the watch stops.)
  if (line.marked || t.store.hasParked?.(line.resource)) {
    t.store.unmarkPolling?.(line.resource);
  }
  line.watch?.stop();
}
