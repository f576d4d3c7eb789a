/**
 * Release announcements as the engine hears them (the wire format: redis/scripts/announce.ts; the
 * subscriber: redis/masters/handoff.ts; the listeners: the waiting policies, waiting/waiting.ts).
 */

/**
 * What a release announcement says (redis/masters/handoff.ts `announcementOf`): `release`, a holder
 * released the resource; `cleanup`, the keys of another engine's failed attempt were deleted
 * (not a holder's release); `subscribed`, not a release: the watch had resolved with no
 * master's confirmation and one came now (a subscriber connection slow to be made), so a
 * release announced before it was heard by nobody — waiters should try again (token: empty).
 * Also told when a master's subscriber connection was lost and its subscriptions are confirmed
 * again: a release announced on that master in between was heard by nobody.
 */
export type Announced = 'release' | 'cleanup' | 'subscribed';

/**
 * Called for each release announcement of a watched resource: what it says, the token whose
 * keys were deleted, and `repeat` when another master already announced that token (every
 * master that deleted a key announces it; the first is not a `repeat`).
 */
export type AnnouncementListener = (announced: Announced, token: string, repeat: boolean) => void;

/**
 * A registration for the release announcements of one resource (hand-off), see
 * {@link LockStore.watchReleases}.
 */
export interface ReleaseWatch {
  /**
   * Monotonic ms from which announcements reach this process: the latest master's subscription
   * confirmation before the watch resolved, or the first after it when none came before, or the
   * latest re-confirmation after a subscriber connection was lost (-Infinity until then, or when
   * nothing can be missed). A release announced before it may have been missed: a waiter whose
   * attempt was sent before it retries at once.
   */
  readonly activeSince: number;
  /**
   * Announcements reach this process (at least one master confirmed the subscription; read it
   * when needed, it may become true later). When `false`, waiters must poll: nothing would wake
   * them before the holder's expiry.
   */
  readonly live: boolean;
  /** Ends the registration. Idempotent. */
  stop(): void;
}
