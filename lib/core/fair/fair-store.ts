/**
 * The store seam of the fair mode: what the fair queue (fair-queue.ts) sends to and reads from a
 * store beyond the plain seam (lib/core/store.ts). The fair Redis store (fair-redis-store.ts)
 * and the testing module's in-memory store provide it; a plain store ignores these fields.
 */
import type { NodeVote } from '../base/errors';
import type { ReleaseResult } from '../quorum/protocol';
import type { AttemptOutcome, AttemptRequest, Grant, LockStore, ReleaseWatch } from '../store';
import type { FairAnnouncementListener } from './fair-announcements';
import type { FairAnnounce } from './fair-mutex';

/** A grant with what the fair mode's attempt told. */
export interface FairGrant extends Grant {
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
   * nobody (redis/scripts/release.ts). A local hand-over's grant carries on its releasing holder's
   * (`FairAttemptRequest.installedBy`): the pass that ends the streak is that same release's
   * follower on a master that has not run it. Absent for other grants, and from stores that do
   * not tell.
   */
  readonly installedBy?: string;
}

/** An attempt with the fair queue's hints. */
export interface FairAttemptRequest extends AttemptRequest {
  /**
   * A local hand-over (fair/handover.ts; plain locks only): the token of this engine's holder
   * that releases the lock to this attempt. Keys holding it count as free and are taken over.
   */
  readonly handoverFrom?: string;
  /**
   * With `handoverFrom`: the releasing holder's `FairGrant.installedBy`, carried on to this attempt's
   * grant (fair/handover.ts `Handover.installedBy`). Stores without installs ignore it.
   */
  readonly installedBy?: string;
  /**
   * Defer to pollers (plain locks that retry; fair/streak.ts): this engine just let the
   * resource go to the pollers of other engines, so a free key on which another engine's poll
   * mark is up refuses this attempt instead of being taken (and the mark then names this engine
   * too: fair/acquire-script.ts FAIR_ACQUIRE_SCRIPT). Stores without poll marks ignore it.
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

/** What a refused fair attempt tells beyond the plain outcome. */
export interface FairRefusal {
  /**
   * Ordered yields: the wait start this attempt sent (`FairAttemptRequest.waitSince`, or its
   * own send time when none was given). The engine sends the same value from then on: the
   * masters keep the first score each got, and one engine's score must not differ between
   * masters (it would swap places with an engine that began to wait at about the same time).
   */
  readonly waitSince?: number;
}

/** The outcome of a fair attempt. */
export type FairAttemptOutcome =
  | { readonly grant: FairGrant }
  | (Exclude<AttemptOutcome, { readonly grant: Grant }> & FairRefusal);

/** A store with the hand-over across processes (every method beyond the plain seam optional). */
export interface FairLockStore extends LockStore {
  attempt(req: FairAttemptRequest): Promise<FairAttemptOutcome>;
  /**
   * {@link LockStore.release}; `only`: on those masters (indexes) only, the others vote `held`
   * (after a local hand-over: handover.ts). `announce`: `'yield'` when the engine's next local
   * waiter lets other processes' waiters go first, `'pass'` when other engines wait for the lock
   * (fair-queue.ts `announceAs`); a plain release by default.
   */
  release(
    grant: Grant,
    waitAll: boolean,
    keepFor?: number,
    only?: readonly number[],
    announce?: FairAnnounce,
  ): Promise<ReleaseResult>;
  /**
   * {@link LockStore.watchReleases}, as the fair mode reads announcements (yields, reservations,
   * installs: fair-announcements.ts).
   */
  watchFairReleases?(
    resource: string,
    onRelease: FairAnnouncementListener,
  ): Promise<ReleaseWatch | undefined>;
  /** Whether `token` belongs to a lock of this engine (its engine id starts it: base/token.ts). */
  ownsToken?(token: string): boolean;
  /**
   * Takes this engine's poll mark of `resource` down on every master where it still starts with
   * this engine's id (fair-keys.ts `pollKey`, unmark-script.ts; best effort, not awaited): the
   * engine stopped waiting for the resource, and waiters of other engines that defer to the mark
   * (`FairAttemptRequest.defer`) need not wait for it to expire. Also takes the engine off the
   * resource's order (fair-keys.ts `orderKey`), so that no yield reserves the key for it.
   */
  unmarkPolling?(resource: string): void;
  /**
   * Whether this engine parked a token for `resource` that a yield may still install; its
   * queue's end then takes it back ({@link unmarkPolling}).
   */
  hasParked?(resource: string): boolean;
  /**
   * `handler` is told the outcome of each install of this engine's parked token for `resource`
   * (a grant, to be given to the head of its queue or released; or `undefined`: too few masters
   * installed it, it was released, the head attempts).
   */
  onInstalled?(handler: (resource: string, grant: Grant | undefined) => void): void;
}
