/**
 * What an engine is made of, as every operation of the policy sees it: one context per engine,
 * built by the facade (redlock.ts), passed to the acquire, release, extension, restore and
 * inspection (policy/*.ts). The operations never see the facade itself.
 */
import type { ResolvedSettings } from '../base/settings';
import type { HeldLocks } from '../lock/held';
import type { LockOwner } from '../lock/lock';
import type { LockStore } from '../store';
import type { AttemptResult } from '../waiting/attempt-result';
import type { WaitingPolicy } from '../waiting/waiting';
import type { Observers } from './observers';

/** One engine's parts (`W`: its waiting policy's ticket). */
export interface EngineContext<W = unknown> {
  /** The engine the locks belong to (the only one that may release or extend them). */
  readonly owner: LockOwner;
  /** The validated settings in force. */
  readonly settings: ResolvedSettings;
  /** Where locks are kept: the masters (redis/store.ts), or the testing module's table. */
  readonly store: LockStore;
  /** Order and wake-ups of the engine's waiting acquires (waiting/waiting.ts). */
  readonly queue: WaitingPolicy<W>;
  /** The engine's observers (events, logger). */
  readonly observers: Observers;
  /** The locks the engine holds. */
  readonly held: HeldLocks;
  /** Attempts on the wire, which `close()` waits for. */
  readonly inflight: InflightAttempts;
  /** Aborted when the engine drains: refuses new attempts, wakes waiting ones. */
  readonly draining: AbortSignal;
}

/**
 * Attempts on the wire, and the clean-up they started (an acquire in flight during
 * `close()`). The engine's `close()` waits for them, so that no grant arrives — and no key is
 * written — after it resolved; a grant that arrives while the engine drains is refused and
 * released (policy/acquire.ts `refuseLate`).
 */
export class InflightAttempts {
  /** Attempts (with their clean-up) not yet settled. */
  private pending = 0;
  /** Callers of {@link settled} waiting for `pending` to reach 0. */
  private idle: (() => void)[] = [];

  /** Tracks `attempt` until it and its clean-up settled; returns it unchanged. */
  track(attempt: Promise<AttemptResult>): Promise<AttemptResult> {
    this.pending++;
    attempt.then(this.attempted, this.done);
    return attempt;
  }

  /** Resolves once no attempt is in flight (also those started while waiting). */
  async settled(): Promise<void> {
    while (this.pending > 0) await new Promise<void>((resolve) => this.idle.push(resolve));
  }

  // Shared by every attempt: a counter and two functions, no promise or closure per attempt.
  private readonly attempted = (r: AttemptResult): void => {
    if (r.cleanup) r.cleanup.then(this.done, this.done);
    else this.done();
  };

  private readonly done = (): void => {
    if (--this.pending > 0 || this.idle.length === 0) return;
    const idle = this.idle;
    this.idle = [];
    for (const resolve of idle) resolve();
  };
}
