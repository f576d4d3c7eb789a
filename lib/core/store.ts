import type { FoundLockKind, NodeVote } from './base/errors';
import type { LockKindSpec } from './base/kind-spec';
import type { ReleaseResult } from './quorum/protocol';
import type { ResolvedSettings } from './base/settings';
import type { MasterHealth } from './base/types';
import type { AnnouncementListener, ReleaseWatch } from './base/announcements';

export type { Announced, AnnouncementListener, ReleaseWatch } from './base/announcements';

/**
 * The store seam: what the policy (acquire loop, keep-alive, observers, the lock's life — see
 * lib/core/redlock.ts) needs from where locks are kept. It returns grants and votes, never
 * `Lock` objects. The Redis store (lib/core/redis/store.ts) runs the quorum protocol on the
 * masters; the testing module's in-memory store (lib/testing/in-memory-store.ts) keeps a table.
 */

/** What one granted attempt holds; the policy wraps it in a `Lock`. */
export interface Grant {
  /** Locked resources, de-duplicated and sorted. */
  readonly resources: readonly string[];
  /** The random token that proves ownership. */
  readonly token: string;
  /** The ttl the keys were set with. */
  readonly ttl: number;
  /** Monotonic time (ms) the request was sent: validity runs from there. */
  readonly start: number;
  /** Wall-clock time (ms) the request was sent, for display. */
  readonly wallStart: number;
  readonly votes: readonly NodeVote[];
  /**
   * Fencing token per resource, in the order of {@link resources} (empty when fencing is off).
   * The lock's name-keyed table is made from it only when someone reads it (Lock.fencingTokens).
   */
  readonly fencingTokens: readonly number[];
  /**
   * Set by the policy once the lock is released or lost: the store sends nothing more that could
   * write its keys (a late EVAL fallback, a repair).
   */
  ended: boolean;
  /** Set by the policy: the lock made from this grant (opaque to stores; see `lockOfGrant`). */
  lock?: object;
  /** The kind of lock granted; a plain lock (mutex) when absent. */
  readonly kind?: LockKindSpec;
}

/** One acquire attempt. */
export interface AttemptRequest {
  readonly resources: readonly string[];
  readonly ttl: number;
  /** The kind of lock; a plain lock (mutex) when absent. */
  readonly kind?: LockKindSpec;
  /** A plain lock refused by shared readers keeps their writer-waiting flag up this long (ms). */
  readonly writerWait?: number;
  /**
   * With `writerWait`: a retry, whose grant takes the resources' writer-waiting flags down
   * (redis/kinds/writer-flag.ts `writerGrantedLua`). Stores without flags ignore it.
   */
  readonly clearWriterFlags?: boolean;
}

/**
 * Why an attempt was not granted. `kind-mismatch`: another kind of lock holds a resource (never
 * retried; see `KindMismatchError`).
 */
export type Refusal = 'contended' | 'unavailable' | 'validity-exhausted' | 'kind-mismatch';

/** The outcome of one attempt: a grant, or why not (and the clean-up still running). */
export type AttemptOutcome =
  | { readonly grant: Grant }
  | {
      readonly grant?: undefined;
      readonly refusal: Refusal;
      readonly votes: readonly NodeVote[];
      /** The clean-up of the failed attempt, while it runs (already sent). */
      readonly cleanup?: Promise<void>;
      /** For `kind-mismatch`: what was found at the key. */
      readonly found?: FoundLockKind;
      /** The votes the request's kind needed (the store's quorum when absent). */
      readonly quorum?: number;
      /**
       * Contended, and one holder refused it on a quorum: that plain lock's token (internal,
       * never in votes or errors). Its release is announced; a failed attempt's clean-up does
       * not free the resource.
       */
      readonly heldBy?: string;
    };

/** The outcome of one extension round. */
export type ExtendOutcome =
  | {
      readonly verdict: 'extended';
      readonly start: number;
      readonly wallStart: number;
      readonly end: number;
      readonly votes: readonly NodeVote[];
    }
  | {
      readonly verdict: 'lost' | 'expired' | 'validity-exhausted' | 'unavailable';
      readonly votes: readonly NodeVote[];
      readonly elapsed: number;
      /**
       * For a lost lock: undoes what the round itself wrote; the policy calls it after the holder
       * was told (its signal aborted).
       */
      readonly afterLoss?: () => Promise<void>;
    };

// --- inspect and lockAtLeastFor ------------------------------------------------------------------

/** What a quorum of masters agrees on about one resource (see quorum/agreement.ts). */
export interface InspectState {
  readonly locked: boolean;
  readonly holders: number;
  readonly ttl: number;
}

/** The outcome of one read-only inspect round: the agreed state, or none when too few answered. */
export interface InspectOutcome {
  /** `undefined` when fewer than a quorum of usable masters answered. */
  readonly state: InspectState | undefined;
  readonly votes: readonly NodeVote[];
}

// ---------------------------------------------------------------------------------------------

/** Sizes of a store's tables (part of the engine's footprint). */
export interface StoreFootprint {
  readonly handoffChannels: number;
  readonly handoffRecent: number;
  /** Release watches: one per contended resource with waiters in an engine. */
  readonly handoffWaiters: number;
}

/** Where locks are kept. */
export interface LockStore {
  /** Redacted names of the masters, in order. */
  readonly masterNames: readonly string[];
  /** Votes needed for a decision. */
  readonly quorum: number;
  /** One acquire attempt, no waiting. Never rejects. */
  attempt(req: AttemptRequest): Promise<AttemptOutcome>;
  /** One extension round to `ttl`, within the lock's current validity (`deadline`, monotonic). */
  extend(grant: Grant, ttl: number, deadline: number): Promise<ExtendOutcome>;
  /**
   * Votes needed by a lock of `kind` (the semaphore's rule may ask for more than {@link quorum}).
   * Optional for stores with a single rule; the policy falls back to {@link quorum}.
   */
  quorumFor?(kind: LockKindSpec | undefined): number;
  /**
   * Compare-and-delete; `waitAll` waits for every master, not just a quorum. With `keepFor`
   * (ms, > 0: `lockAtLeastFor`), compare-and-pexpire to `keepFor` instead: keys still holding
   * the grant's token stay, with that TTL; nothing is announced to waiters.
   */
  release(grant: Grant, waitAll: boolean, keepFor?: number): Promise<ReleaseResult>;
  /**
   * One read-only round about `resource`: no write of any kind, not an attempt (see
   * quorum/agreement.ts for what is agreed).
   */
  inspect(resource: string): Promise<InspectOutcome>;
  /** Every master's health. */
  health(): Promise<MasterHealth[]>;
  /**
   * Calls `onRelease` whenever a release of `resource` is announced (by this process or any
   * other), until the watch is stopped. The engine's local queue (fair/fair-queue.ts) keeps
   * one watch per contended resource and wakes the head of its queue. See
   * {@link AnnouncementListener}.
   * `undefined` when the store announces nothing; waiters then poll.
   */
  watchReleases(
    resource: string,
    onRelease: AnnouncementListener,
  ): Promise<ReleaseWatch | undefined>;
  /**
   * A retrying plain acquire of `resources` ended without a lock: the writer-waiting flags this
   * engine raised for it are taken down (redis/kinds/writer-flag.ts; best effort, not awaited).
   */
  writerGaveUp?(resources: readonly string[]): void;
  /**
   * Calls `listener` whenever the store stops trusting a master's votes while running (a clock
   * jump: redis/masters/clock-watch.ts), so that the policy re-checks the locks it holds that
   * needed that master. Returns a function that stops it. Optional: stores whose votes cannot go
   * bad (the in-memory table) have none; a store that has it has {@link distrustOf} too.
   */
  watchMasters?(listener: (e: MasterDistrust) => void): () => void;
  /**
   * Why master `node`'s votes do not count now (see {@link watchMasters}); `undefined` while they
   * count. The policy's re-checks count a lock's granting masters with it: the held locks'
   * after a distrust, and each lock's as it is handed out (policy/distrust.ts).
   */
  distrustOf?(node: number): MasterDistrust | undefined;
  readonly footprint: StoreFootprint;
  /** An error's message without credentials (for logs). */
  describe(err: unknown): string;
  /** Drops what the store created (connections, listeners, timers). */
  close(): Promise<void>;
}

/** A master whose votes the store stopped trusting while running (see {@link LockStore.watchMasters}). */
export interface MasterDistrust {
  /** The master's position. */
  readonly node: number;
  /** Its redacted name. */
  readonly name: string;
  /** How far its clock moved beyond the drift allowance (or is off the others), ms; + forward. */
  readonly jump: number;
  /** `jumped`: against the engine's monotonic clock; `disagrees`: off the other masters' clocks. */
  readonly cause: 'jumped' | 'disagrees';
  /** How long its votes do not count, ms. */
  readonly quarantine: number;
}

/** Marks a {@link StoreFactory} (an array of clients never has it). */
export const STORE_FACTORY: unique symbol = Symbol('nestjs-redlock.store-factory');

/**
 * Opens a store for an engine once its settings are resolved (the settings depend on the number
 * of masters). How the testing module gives the engine its in-memory store.
 */
export interface StoreFactory {
  readonly [STORE_FACTORY]: true;
  /** Number of masters the store stands for (the quorum is computed from it). */
  readonly masters: number;
  open(settings: ResolvedSettings): LockStore;
}

/** Whether the engine's first argument is a {@link StoreFactory}. */
export function isStoreFactory(value: unknown): value is StoreFactory {
  return typeof value === 'object' && value !== null && STORE_FACTORY in value;
}
