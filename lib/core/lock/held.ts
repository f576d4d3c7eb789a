/** The set of locks an engine holds (lock.ts has a lock and its state). */
import { monotonicNow } from '../base/clock';
import { lockState } from './lock';
import type { Lock } from './lock';

/** Shortest interval in ms between two sweeps of expired locks. */
const MIN_SWEEP_INTERVAL = 50;

/**
 * The locks an engine holds: granted, not released, and still within their validity.
 *
 * A lock that is never released (left to expire) leaves the set on its own shortly after its
 * validity ends: one timer per engine (unref'd, only while locks are held) sweeps the set at the
 * earliest validity end, at most every {@link MIN_SWEEP_INTERVAL} ms. Long-running processes that
 * let locks expire therefore stay flat instead of keeping every lock until `close()`.
 */
export class HeldLocks {
  private readonly locks = new Set<Lock>();
  private timer: NodeJS.Timeout | undefined;
  /** Monotonic time of the next sweep (Infinity when none is scheduled). */
  private due = Infinity;

  /** Number of locks held. */
  get size(): number {
    return this.locks.size;
  }

  /** A snapshot of the locks held. */
  list(): Lock[] {
    return [...this.locks];
  }

  add(lock: Lock): void {
    this.locks.add(lock);
    this.schedule(lockState(lock).validUntil);
  }

  /**
   * The sweep timer stays armed when the set empties (unref'd, it never holds the process): the
   * next lock of a process that locks one resource after another reuses it instead of paying a
   * `setTimeout` and a `clearTimeout` per lock; a sweep that finds the set empty does not re-arm.
   */
  delete(lock: Lock): void {
    this.locks.delete(lock);
  }

  /** Stops the sweep timer (the engine closes). */
  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.due = Infinity;
  }

  private schedule(at: number): void {
    if (this.timer && at >= this.due) return;
    if (this.timer) clearTimeout(this.timer);
    const now = monotonicNow();
    this.due = Math.max(at, now + MIN_SWEEP_INTERVAL);
    this.timer = setTimeout(() => this.sweep(), this.due - now + 1);
    this.timer.unref?.();
  }

  /** Drops released and expired locks; re-arms for the earliest validity end left. */
  private sweep(): void {
    this.timer = undefined;
    this.due = Infinity;
    const now = monotonicNow();
    let next = Infinity;
    for (const lock of this.locks) {
      const s = lockState(lock);
      if (s.released || s.validUntil <= now) this.locks.delete(lock);
      else if (s.validUntil < next) next = s.validUntil;
    }
    if (next < Infinity) this.schedule(next);
  }
}
