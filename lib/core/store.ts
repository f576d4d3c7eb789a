import type { FoundLockKind, NodeVote } from './errors';
import type { LockKindSpec } from './kind-spec';
import type { ReleaseResult } from './quorum/protocol';
import type { ResolvedSettings } from './settings';
import type { MasterHealth } from './types';
import type { AnnouncementListener, ReleaseWatch } from './announcements';

export type { Announced, AnnouncementListener, Reserved, ReleaseWatch } from './announcements';

/**
 * The store seam: what the policy (acquire loop, keep-alive, observers, the lock's life — see
 * lib/core/redlock.ts) needs from where locks are kept. It returns grants and votes, never
 * `Lock` objects. The Redis store (lib/core/redis-store.ts) runs the quorum protocol on the
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
  /**
   * A local hand-over's grant (fair/handover.ts): the most release watchers (engines
   * subscribed to the resources' release announcements, this one's included) that a granting
   * master counted; `Infinity` when one did not say. The local queue reads from it whether
   * other engines wait (fair/streak.ts `mustYield`). Absent for other grants.
   */
  readonly watchers?: number;
  /**
   * A local hand-over's grant: the longest remaining poll mark a granting master had on the
   * resources (ms; 0 when none) — another engine's plain lock was refused there and will poll
   * again within it (fair/streak.ts). Absent for other grants.
   */
  readonly polled?: number;
  /**
   * Other engines waited for the resource when it was granted (a granting master had them in
   * its order: ordered yields, one plain resource): its release is a pass to the one that waited
   * longest (fair/fair-queue.ts `announceAs`), even for a lock taken at the first attempt.
   * Absent or false otherwise, and from stores without the order.
   */
  readonly othersWait?: boolean;
  /**
   * A local hand-over's grant: every master's final vote on the take-over, once each answered
   * or its per-node timeout passed (the verdict came at a quorum, maybe before some of them).
   * The releasing holder releases its keys only where the take-over was not `ok` in the end
   * (fair/handover.ts). Absent for other grants, and from stores that do not tell.
   */
  readonly takenOver?: Promise<readonly NodeVote[]>;
  /**
   * A lock installed by another engine's yield or pass (the hand-over across processes,
   * fair/installs.ts): that release's token, announced by the most masters. Its own yield or
   * pass sends it along: a master whose key still holds that token has not run that release yet
   * — commands of two processes may reach a descheduled master in either order — and names
   * nobody (scripts/release.ts). A local hand-over's grant carries on its releasing holder's
   * (`AttemptRequest.installedBy`): the pass that ends the streak is that same release's
   * follower on a master that has not run it. Absent for other grants, and from stores that do
   * not tell.
   */
  readonly installedBy?: string;
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
   * (kinds/writer-flag.ts `writerGrantedLua`). Stores without flags ignore it.
   */
  readonly clearWriterFlags?: boolean;
  /**
   * A local hand-over (fair/handover.ts; plain locks only): the token of this engine's holder
   * that releases the lock to this attempt. Keys holding it count as free and are taken over.
   */
  readonly handoverFrom?: string;
  /**
   * With `handoverFrom`: the releasing holder's `Grant.installedBy`, carried on to this attempt's
   * grant (fair/handover.ts `Handover.installedBy`). Stores without installs ignore it.
   */
  readonly installedBy?: string;
  /**
   * Defer to pollers (plain locks that retry; fair/streak.ts): this engine just let the
   * resource go to the pollers of other engines, so a free key on which another engine's poll
   * mark is up refuses this attempt instead of being taken (and the mark then names this engine
   * too: kinds/mutex-scripts.ts ACQUIRE_SCRIPT). Stores without poll marks ignore it.
   */
  readonly defer?: boolean;
  /**
   * Ordered yields (plain locks that retry; fair/streak.ts): since when this engine waits for
   * the resource (wall ms; the attempt's own time when absent). The masters order the waiting
   * engines by it, and a yield reserves the resource for the one that waited longest. Stores
   * without the order ignore it.
   */
  readonly waitSince?: number;
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
      /**
       * Ordered yields: the wait start this attempt sent (`AttemptRequest.waitSince`, or its
       * own send time when none was given). The engine sends the same value from then on: the
       * masters keep the first score each got, and one engine's score must not differ between
       * masters (it would swap places with an engine that began to wait at about the same time).
       */
      readonly waitSince?: number;
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
   * the grant's token stay, with that TTL; nothing is announced to waiters. `only`: on those
   * masters (indexes) only, the others vote `held` (after a local hand-over: fair/handover.ts).
   * `announce`: how the release is announced (default `'release'`; `'yield'` when the engine's
   * next local waiter lets other processes' waiters go first, `'pass'` when other engines wait
   * for the lock: fair/fair-queue.ts `announceAs`).
   */
  release(
    grant: Grant,
    waitAll: boolean,
    keepFor?: number,
    only?: readonly number[],
    announce?: 'release' | 'yield' | 'pass',
  ): Promise<ReleaseResult>;
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
   * Whether `token` belongs to a lock of this engine (its engine id starts it: token.ts). Stores
   * without poll marks (one process: the in-memory store) leave it out.
   */
  ownsToken?(token: string): boolean;
  /**
   * Takes this engine's poll mark of `resource` down on every master where it still starts
   * with this engine's id, joined by a deferring engine or not (fair/fair-keys.ts `pollKey`,
   * fair/unmark-script.ts UNMARK_SCRIPT; best effort, not awaited): the engine stopped
   * waiting for the resource, and waiters of other engines that defer to the mark
   * (`AttemptRequest.defer`) need not wait for it to expire. Also takes the engine off the
   * resource's order (fair/fair-keys.ts `orderKey`), so that no yield reserves the key for it.
   * Stores without poll marks leave it out.
   */
  unmarkPolling?(resource: string): void;
  /**
   * A retrying plain acquire of `resources` ended without a lock: the writer-waiting flags this
   * engine raised for it are taken down (kinds/writer-flag.ts; best effort, not awaited).
   */
  writerGaveUp?(resources: readonly string[]): void;
  /**
   * Hand-over across processes: whether this engine parked a token for `resource` that a yield
   * may still install; its queue's end then takes it back ({@link unmarkPolling}).
   */
  hasParked?(resource: string): boolean;
  /**
   * Hand-over across processes: `handler` is told the outcome of each install of this engine's
   * parked token for `resource` (a grant, to be given to the head of its queue or released; or
   * `undefined`: too few masters installed it, it was released, the head attempts).
   */
  onInstalled?(handler: (resource: string, grant: Grant | undefined) => void): void;
  readonly footprint: StoreFootprint;
  /** An error's message without credentials (for logs). */
  describe(err: unknown): string;
  /** Drops what the store created (connections, listeners, timers). */
  close(): Promise<void>;
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
