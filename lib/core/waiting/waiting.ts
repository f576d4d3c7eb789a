import type { LockContendedError, LockErrorDetail, NodeVote } from '../base/errors';
import type { Lock } from '../lock/lock';
import type { AttemptResult } from './attempt-result';
import type { ReleaseResult } from '../quorum/protocol';
import type { AttemptOutcome, AttemptRequest, Grant, LockStore } from '../store';
import type { RedlockClient, ResolvedSettings } from '../base/settings';

/**
 * The waiting seam: what the acquire loop (policy/acquire.ts) asks around each attempt of
 * a retrying acquire, and what a release asks, of the engine's waiting policy. Efficiency and
 * fairness only — the masters decide who holds a lock; nothing behind this seam is needed for
 * mutual exclusion.
 *
 * Two policies implement it, chosen by the `fairness` setting:
 * - `'local'` (the default, waiting/fifo-queue.ts): a FIFO per resource inside the process, one
 *   attempt at a time per resource, woken by a local release or a release announcement;
 * - `'across-processes'` (fair/fair-queue.ts and lib/core/fair/README.md): the same
 *   FIFO, plus the hand-over across processes that serves the waiters of every process in the
 *   order they began to wait.
 *
 * `W` is the policy's own record of one waiting acquire (its ticket).
 */
export interface WaitingPolicy<W> {
  /** Number of queued acquires (part of the engine's footprint). */
  readonly size: number;
  /** Queues a retrying acquire of `resources` behind the local entries already queued for them. */
  join(resources: readonly string[], exclusive: boolean, ttl: number): W;
  /** Whether `waiter` may attempt now (its turn came, no local holder keeps it back). */
  admitted(waiter: W): boolean;
  /** Until when (monotonic ms) local holders keep `waiter` back; Infinity when unknown. */
  holdersEnd(waiter: W): number;
  /**
   * Sleeps until `waiter` is woken (its turn, a release of one of its resources), `until`
   * (monotonic ms) passes, `signal` aborts or the engine drains.
   */
  sleep(waiter: W, until: number, signal: AbortSignal | undefined): Promise<void>;
  /**
   * Fair mode only: a grant another engine's release installed for `waiter`, taken once; when
   * not `usable` (the acquire was aborted, the engine drains) the policy releases it and
   * returns `undefined`.
   */
  takeGranted?(waiter: W, usable: boolean): Grant | undefined;
  /** Fair mode only: what `waiter`'s next attempt asks of the store beyond the request. */
  beforeAttempt?(waiter: W): AttemptHints | undefined;
  /**
   * `waiter`'s attempt was refused (contended): `votes`, `heldBy` (the one plain lock that
   * refused it on a quorum, if any), `sentWall` (when it was sent, wall ms). `'retry'`: retry at
   * once — that holder's release was already announced by a quorum before the refusal was
   * read; `'poll'`: sleep the algorithm's retry delay; `undefined`: sleep until woken.
   * `outcome`: the store's own (a policy may read its store's fields from it).
   */
  refused(
    waiter: W,
    votes: readonly NodeVote[],
    heldBy: string | undefined,
    sentWall: number,
    outcome?: AttemptOutcome,
  ): 'retry' | 'poll' | undefined;
  /**
   * Ensures the release watches of `waiter`'s resources after a contended attempt sent at
   * `sentAt` (monotonic ms). `fresh`: a watch became active after the attempt was sent, so a
   * release may have been missed (retry at once); `live`: every resource's releases are
   * announced (otherwise the waiter polls).
   */
  watch(waiter: W, sentAt: number): Promise<{ fresh: boolean; live: boolean }>;
  /**
   * `waiter` was granted `lock` (`result`: its attempt's, with the store's grant; `undefined`
   * when it made none — fair mode: installed); it leaves the queue.
   */
  granted(waiter: W, lock: Lock, result: AttemptResult | undefined): void;
  /** `waiter` stops waiting (granted, gave up, aborted). Idempotent. */
  leave(waiter: W): void;
  /** The contention error of a queued acquire that gives up before its turn came. */
  contended(waiter: W, detail: Omit<LockErrorDetail, 'votes'>): LockContendedError;
  /** A lock of this engine ended (released or lost): its resources' next waiters are woken. */
  ended(lock: Lock): void;
  /**
   * Fair mode only: hands `lock` (a valid plain lock being released; `grant`, its grant) to the
   * next local waiter, which takes it over in its next attempt; called before the lock is marked
   * released. `undefined` when none may (a plain release follows).
   */
  handover?(lock: Lock, grant: Grant): LocalHandover | undefined;
  /**
   * Fair mode only: sends the release of `lock` (its end was just reported: {@link ended}) the
   * policy's own way, waiting for every master (fair/fair-queue.ts: as a yield or a pass);
   * `store.release` when absent.
   */
  release?(lock: Lock, grant: Grant): Promise<ReleaseResult>;
  /** Wakes every sleeper and drops every timer and watch (the engine closes). */
  close(): void;
}

/** What a waiting policy makes of one attempt (fair mode: fair/fair-queue.ts `beforeAttempt`). */
export interface AttemptHints {
  /** The request as the policy's store takes it (fair mode: fair/fair-store.ts). */
  request(req: AttemptRequest): AttemptRequest;
  /** Told the attempt's result once it ended (`undefined`: it threw). */
  settle?(result: AttemptResult | undefined): void;
  /**
   * A refusal that names no single holder wakes nobody when a release is announced: the waiter
   * polls (fair mode: a deferral to other engines' pollers).
   */
  readonly polls?: boolean;
}

/** A local hand-over under way (fair mode, {@link WaitingPolicy.handover}). */
export interface LocalHandover {
  /**
   * Ends the release of `grant` once the taker's attempt ended: its keys are released where the
   * take-over did not land (everywhere when the taker made no attempt or was refused).
   */
  finish(grant: Grant): Promise<ReleaseResult>;
}

/**
 * A mode of the engine (the `fairness` setting): the store it keeps locks in on the masters, and
 * the waiting policy over a store. The default mode is the facade's (lib/core/redlock.ts: the
 * plain Redis store and waiting/fifo-queue.ts); the fair mode is `fairMode` (lib/core/fair).
 * An engine over another store (the testing module's) takes only the mode's waiting policy.
 */
export interface EngineMode {
  /** The store over `clients`, one per master. */
  store(clients: readonly RedlockClient[], settings: ResolvedSettings): LockStore;
  /** The waiting policy over `store`; `draining` aborts when the engine drains. */
  queue(store: LockStore, draining: AbortSignal): WaitingPolicy<unknown>;
}
