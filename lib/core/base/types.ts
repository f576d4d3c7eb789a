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
   * by a stream of readers (docs/lock-kinds.md, "Shared (read) locks"). Not together with `limit`.
   */
  shared?: boolean;
  /**
   * A counting semaphore: at most `limit` (integer ≥ 1) holders at once. Every holder of a
   * resource must use the same limit. Each holder needs more than N·limit/(limit+1) masters
   * (docs/lock-kinds.md, "Semaphores"). Not together with `shared`.
   */
  limit?: number;
  /**
   * Keep the resource locked for at least this many ms after the grant (ShedLock's
   * `lockAtLeastFor`, for scheduled jobs on several replicas): a release before then does not
   * delete the keys but shortens their TTL to the remainder, so a replica whose timer fires a
   * little later still finds the resource locked. An integer in [0, `maxTtl`]. Honoured by
   * every release of the lock (`release()`, the end of `using()` and `@Locked()` calls).
   */
  lockAtLeastFor?: number;
}

/** Options of {@link Redlock.release}. */
export interface ReleaseOptions {
  /**
   * Keep the resource locked until this many ms after the grant, overriding the lock's own
   * `lockAtLeastFor` (see {@link AcquireOptions.lockAtLeastFor}); 0 deletes the keys at once.
   * An integer in [0, `maxTtl`].
   */
  lockAtLeastFor?: number;
  /**
   * When the release resolves. `'all'` (the default): once every master answered or its request
   * timed out, so that the result says whether every master deleted its key
   * (`ReleaseResult.complete`). `'quorum'`: as soon as a quorum of masters deleted the lock's
   * keys — as node-redlock does, and all the algorithm needs (docs/REDLOCK.md, "N masters"):
   * the deletes on the other masters are already sent and land as their answers come (or those
   * keys expire with their ttl), so a slow or unreachable master costs no wait — or as soon as
   * so many answered otherwise (nothing of ours there, an error) that no quorum can. Its result
   * describes the masters that had answered by then: the others are `pending` votes, and
   * `complete` is `true` only when every master had answered; the `released` event carries the
   * same result. A hand-over to a local waiter and the fair mode's release are not affected.
   * The lock is released on the holder's side at once either way.
   */
  wait?: ReleaseWait;
}

/** When a release resolves (see {@link ReleaseOptions.wait}). */
export type ReleaseWait = 'all' | 'quorum';

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
  /**
   * While its votes do not count because its clock jumped (the `clockCheck` setting): how far,
   * in ms (+ forward, − back; for a clock off the others': how far it is off the other
   * masters). `quarantined` is true then.
   */
  readonly clockJump?: number;
  /**
   * Why its votes do not count although it may answer — a read-only replica, a Sentinel, a server
   * whose ACL refuses the engine's scripts, a second listing of another master (same `run_id`) —
   * found by the checks after every (re)connect (docs/operations.md, "What is checked on the
   * masters"). Such a master is not counted in {@link RedlockHealth.usable}.
   */
  readonly unusable?: string;
  /**
   * Set when the master may evict lock keys under memory pressure (`maxmemory` with an
   * `allkeys-*` or `volatile-*` policy): that `maxmemory-policy`. Lock masters should run with
   * `noeviction`.
   */
  readonly evictionPolicy?: string;
  /** What the checks could not find out about the master, and why (e.g. CONFIG refused by its ACL). */
  readonly unchecked?: readonly string[];
  /** Why it is unreachable (never contains credentials). */
  readonly error?: string;
}

/** Health of the whole lock service (see {@link Redlock.health}). */
export interface RedlockHealth {
  /** Votes needed. */
  readonly quorum: number;
  /** Masters that are reachable, not in quarantine and not {@link MasterHealth.unusable}. */
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
  /** Release watches of the hand-off notifier: one per contended resource with local waiters. */
  readonly handoffWaiters: number;
  /** Acquires waiting in the engine's local queue (FIFO per resource). */
  readonly queuedAcquires: number;
}

/**
 * What a quorum of masters agrees on about one resource (see {@link Redlock.inspect}). Only
 * what at least `quorum` masters confirm is stated.
 */
export interface ResourceInspection {
  /** The resource asked about. */
  readonly resource: string;
  /** A quorum of masters has a live holder of the resource (any kind of lock). */
  readonly locked: boolean;
  /**
   * The largest number of holders a quorum agrees on: 0 or 1 for a mutex, the count for shared
   * locks and semaphores.
   */
  readonly holders: number;
  /**
   * ms until a quorum no longer agrees that the resource is held, if nobody extends (the largest
   * t such that a quorum of masters has a holder living at least t ms more); 0 when not locked,
   * -1 when a quorum holds the key without expiry (a key this engine never writes).
   */
  readonly ttl: number;
}
