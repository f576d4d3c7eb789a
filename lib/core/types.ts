import type { Lock } from './lock';

/** Public option, health and footprint types of the engine ({@link Redlock}). */

/** Per-call options of {@link Redlock.acquire}. Unset fields fall back to the engine settings. */
export interface AcquireOptions {
  /** Lock time-to-live in ms (integer, at most the `maxTtl` setting). */
  ttl?: number;
  /** Retries after the first attempt. */
  retryCount?: number;
  /** Base delay in ms between attempts. */
  retryDelay?: number;
  /** Random ± spread in ms added to each delay. */
  retryJitter?: number;
  /** Overall deadline in ms: give up with {@link WaitTimeoutError} once it passes. */
  waitTimeout?: number;
  /** Cancels a pending acquire with {@link LockAbortedError}. */
  signal?: AbortSignal;
  /**
   * A shared (read) lock: any number of shared holders at once, never together with a plain
   * lock of the same resource (the exclusive, write side). Waiting plain locks are not starved
   * by a stream of readers (README, "Shared locks"). Not together with `limit`.
   */
  shared?: boolean;
  /**
   * A counting semaphore: at most `limit` (integer ≥ 1) holders at once. Every holder of a
   * resource must use the same limit. Each holder needs more than N·limit/(limit+1) masters
   * (README, "Semaphores"). Not together with `shared`.
   */
  limit?: number;
}

/** Options of {@link Redlock.using}: acquire options plus automatic extension control. */
export interface UsingOptions extends AcquireOptions {
  /** Extend the lock automatically while the routine runs. Default `true`. */
  autoExtend?: boolean;
  /** Extend when the remaining validity falls below this many ms. Default: the engine setting. */
  extendThreshold?: number;
}

/** One master's health, as seen by this engine (see {@link Redlock.health}). */
export interface MasterHealth {
  /** Position in the client list. */
  readonly node: number;
  /** Redacted address. */
  readonly name: string;
  /** Whether the master answered within the request timeout. */
  readonly reachable: boolean;
  /** Round-trip time in ms of the check, when it answered. */
  readonly latency: number | undefined;
  /** Whether the master is in restart quarantine (its votes do not count yet). */
  readonly quarantined: boolean;
  /** While quarantined: at most how many more ms the quarantine lasts (server clock). */
  readonly quarantineRemaining?: number;
  /** Why it is unreachable (never contains credentials). */
  readonly error?: string;
}

/** Health of the whole lock service (see {@link Redlock.health}). */
export interface RedlockHealth {
  /** Votes needed. */
  readonly quorum: number;
  /** Masters that are reachable and not in quarantine. */
  readonly usable: number;
  /** Whether locks can be granted: a quorum of usable masters exists and the engine is not draining. */
  readonly available: boolean;
  /** `true` once the engine stopped taking new locks (`drain()` / `close()`, app shutdown). */
  readonly draining: boolean;
  readonly masters: readonly MasterHealth[];
}

/** Sizes of an engine's internal tables (see {@link Redlock.footprint}). */
export interface RedlockFootprint {
  /** Locks held: granted, not released, not yet expired. */
  readonly heldLocks: number;
  /** Release channels subscribed for waiting acquires (hand-off). */
  readonly handoffChannels: number;
  /** Channels with recently announced releases remembered for de-duplication. */
  readonly handoffRecent: number;
  /** Acquires registered with the hand-off notifier (retrying after contention). */
  readonly handoffWaiters: number;
}

/** The routine run by {@link Redlock.using}. */
export type LockedRoutine<T> = (signal: AbortSignal, lock: Lock) => Promise<T> | T;
