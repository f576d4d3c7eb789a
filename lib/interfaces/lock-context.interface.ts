import type { Lock } from '../core';

/**
 * The lock the current call chain holds, as returned by `RedlockService.current()` inside a
 * `@Locked()` method or a `RedlockService.using()` routine.
 */
export interface LockContext {
  /** Locked resources (de-duplicated, sorted). */
  readonly resources: readonly string[];
  /** The lock's random ownership token (`lock.value`). */
  readonly token: string;
  /** Fencing token per resource (strictly increasing across holders). Empty if fencing is off. */
  readonly fencingTokens: Readonly<Record<string, number>>;
  /** Fencing token of the first resource. */
  readonly fencingToken: number | undefined;
  /** Milliseconds of validity left (monotonic clock); 0 once lost or released. */
  readonly remainingValidity: number;
  /** Aborts (reason: `LockLostError`) when the lock is lost or its validity ends. */
  readonly signal: AbortSignal;
  /** The engine's lock object. */
  readonly lock: Lock;
}
