import type { NodeVote } from '../base/errors';
import type { ReleaseResult } from '../quorum/protocol';
import type { AttemptResult } from '../waiting/attempt-result';
import type { Grant } from '../store';
import type { FairGrant, FairLockStore } from './fair-store';

/**
 * A local hand-over: a plain lock released while the next local
 * waiter of exactly its resources may take it goes straight to that waiter. The waiter's next
 * attempt carries the releasing holder's token (`FairAttemptRequest.handoverFrom`); the acquire
 * script treats a key holding that token as free and overwrites it (token, ttl, a new fencing
 * token). One round instead of a release round and an acquire round; nothing is deleted, so the
 * resource is never free in between and no release is announced — the waiters of other
 * processes, asleep until a release announcement or the holder's expiry, are not woken for a
 * race they cannot win.
 *
 * Safety: the taker is a new holder like any other. It is granted only by a quorum of masters
 * within its own validity (counted from when its attempt was sent, docs/REDLOCK.md "N masters");
 * the releasing holder is marked released before the attempt is sent, so the two never hold
 * at once. Keys of any other token refuse as usual.
 *
 * The releasing holder's release waits for that attempt, and for the answers of the masters the
 * verdict did not wait for (at most the per-node timeout: `FairGrant.takenOver`). The masters that
 * answered `ok` hold the taker's token; the holder's keys are released the usual way on the
 * others only (compare-and-delete of its token: a key already taken over is not touched), and on
 * every master when the taker made no attempt (it gave up or aborted) or was not granted.
 *
 * Fairness across processes is unchanged: the local queue hands over at most a streak's bound
 * (fair/streak.ts `mustYield`) times in a row while other processes may wait
 * (fair/fair-queue.ts); then the lock is released and announced.
 */
export interface Handover {
  /** The releasing holder's token. */
  readonly from: string;
  /**
   * The releasing holder's `FairGrant.installedBy` (a lock installed by another engine's yield or
   * pass, or handed over from one): the taker's grant carries it on, so that the pass that ends
   * this engine's streak still names nobody on a master that has not run that yield or pass yet
   * (redis/scripts/release.ts ARGV[14]).
   */
  readonly installedBy: string | undefined;
  /** Settled once: by the taker's attempt, or `undefined` when it made none. */
  readonly done: Promise<AttemptResult | undefined>;
  /** Settles {@link done} (later calls are ignored). */
  settle(result: AttemptResult | undefined): void;
  /** The rest of the holder's release (waiting/waiting.ts `LocalHandover`). */
  finish(grant: Grant): Promise<ReleaseResult>;
}

/** What the taker's attempt sends of a hand-over (policy/acquire.ts `attemptOnStore`). */
export type HandoverFrom = Pick<Handover, 'from' | 'installedBy'>;

/** A hand-over from the holder of `token` (its grant's `installedBy`, if any). */
export function newHandover(token: string, store: FairLockStore, installedBy?: string): Handover {
  let resolve!: (r: AttemptResult | undefined) => void;
  const done = new Promise<AttemptResult | undefined>((r) => (resolve = r));
  let settled = false;
  return {
    from: token,
    installedBy,
    done,
    settle(result) {
      if (settled) return;
      settled = true;
      resolve(result);
    },
    finish: (grant) => finishRelease(done, store, grant),
  };
}

/** Settles a hand-over that `waiter` will not take (it sleeps again or leaves): none made. */
export function decline(waiter: { takeover: Handover | undefined }): void {
  waiter.takeover?.settle(undefined);
  waiter.takeover = undefined;
}

/**
 * The taker's votes on the masters at the end of its attempt `result`: each master's final vote
 * (`AttemptResult.takenOver`: the masters still pending at the verdict answered later or timed
 * out), or the votes of the verdict when the store does not tell; `undefined` when no attempt
 * was made or it was not granted.
 */
export async function takeOverVotes(
  result: AttemptResult | undefined,
): Promise<readonly NodeVote[] | undefined> {
  if (!result?.lock) return undefined;
  return (await (result.grant as FairGrant).takenOver) ?? result.lock.votes;
}

/**
 * The masters (indexes) where the releasing holder's keys may still hold its token after the
 * taker's attempt, given its votes (`takeOverVotes`): every master when no attempt was made or it
 * was not granted (its clean-up removed only the taker's own keys), otherwise those whose
 * take-over was not `ok` — it timed out, failed, or the store did not tell its late answer
 * (`pending`). Their keys are released the usual way; on a master whose take-over is still on
 * its way, the compare-and-delete runs after it and finds the taker's token (left untouched).
 * A master that answered `ok` after the verdict holds the taker's token: nothing to release
 * there (one compare-and-delete per such master saved on every hand-over).
 */
export function notTakenOver(votes: readonly NodeVote[] | undefined): number[] | undefined {
  if (!votes) return undefined;
  const rest: number[] = [];
  for (let i = 0; i < votes.length; i++) if (votes[i].outcome !== 'ok') rest.push(i);
  return rest;
}

/** The release result of a hand-over: `ok` where taken over, the release round's votes elsewhere. */
export function handoverResult(
  taken: readonly NodeVote[],
  rest: ReleaseResult | undefined,
): ReleaseResult {
  const votes = taken.map((v, i) => (v.outcome === 'ok' || !rest ? v : rest.votes[i]));
  const deleted = votes.filter((v) => v.outcome === 'ok').length;
  return {
    deleted,
    complete: votes.every((v) => v.outcome === 'ok' || v.outcome === 'held'),
    votes,
  };
}

/**
 * The releasing holder's side once the taker's attempt (`done`) ended: its keys are released
 * where the take-over did not land ({@link notTakenOver}), on every master when no attempt was
 * made or it was not granted; the result says `ok` where the taker took over.
 */
async function finishRelease(
  done: Promise<AttemptResult | undefined>,
  store: FairLockStore,
  grant: Grant,
): Promise<ReleaseResult> {
  const taken = await takeOverVotes(await done);
  const rest = notTakenOver(taken);
  if (!taken || !rest) return store.release(grant, true);
  const others = rest.length > 0 ? await store.release(grant, true, undefined, rest) : undefined;
  return handoverResult(taken, others);
}
