import { driftFor } from '../clock';
import type { NodeOutcome, NodeVote } from '../errors';

/**
 * The steps of the Redlock protocol (docs/REDLOCK.md, "N masters"; step numbers are its own), as
 * pure decisions over the votes of one round (quorum/round.ts). No Redis, no timers, no retries:
 *
 * - Steps 1–2: note a monotonic start time, send to all N masters in parallel, each bounded by a
 *   per-node timeout that is small and never longer than the ttl's validity
 *   ({@link attemptTimeout}).
 * - Steps 3–4: granted only with a quorum of `ok` votes **and** validity left, validity =
 *   ttl − elapsed − drift, drift = ttl × driftFactor + 2 ms ({@link validityAfter},
 *   {@link validUntil}); which refusal it is when not ({@link acquireVerdict}).
 * - Step 5: on failure, undo on every master that may hold the token ({@link mayHoldToken}).
 * - "Extension": the same quorum and validity rule, never beyond the current validity; too few
 *   masters left that can hold the key means the lock is lost ({@link extendVerdict}).
 * - "One master": release is compare-and-delete everywhere ({@link releaseSummary}).
 */

export { driftFor };

/** Validity left (ms) of a ttl sent at monotonic time `start`, seen at `now` (step 4). */
export function validityAfter(
  ttl: number,
  start: number,
  now: number,
  driftFactor: number,
): number {
  return ttl - (now - start) - driftFor(ttl, driftFactor);
}

/** The monotonic deadline of a ttl granted for a request sent at `start`. */
export function validUntil(start: number, ttl: number, driftFactor: number): number {
  return start + ttl - driftFor(ttl, driftFactor);
}

/** Per-node timeout of an acquire (step 2): the request timeout, never more than the validity. */
export function attemptTimeout(requestTimeout: number, ttl: number, driftFactor: number): number {
  return Math.max(1, Math.min(requestTimeout, ttl - driftFor(ttl, driftFactor)));
}

/** Outcomes of masters that could not have granted a lock even if it were free. */
const UNUSABLE: ReadonlySet<NodeOutcome> = new Set<NodeOutcome>([
  'error',
  'timeout',
  'quarantined',
]);

/** What the votes of an acquire round say (validity is checked separately, step 2). */
export type AcquireVerdict = 'quorum' | 'contended' | 'unavailable';

/**
 * Step 3: a quorum of `ok` votes; otherwise contended when someone holds the resource and the
 * masters that did not fail could have made a quorum had it been free (waiting for the holder
 * helps), else an outage.
 */
export function acquireVerdict(
  votes: readonly NodeVote[],
  ok: number,
  quorum: number,
): AcquireVerdict {
  if (ok >= quorum) return 'quorum';
  const held = votes.filter((v) => v.outcome === 'held').length;
  const unusable = votes.filter((v) => UNUSABLE.has(v.outcome)).length;
  return held > 0 && votes.length - unusable >= quorum ? 'contended' : 'unavailable';
}

/**
 * Step 5: whether a master may hold the token of a failed attempt and must be cleaned up — all
 * but those that answered `held` (the script is all-or-nothing there; on a Cluster master, where
 * each slot group runs its own script, every master).
 */
export function mayHoldToken(vote: NodeVote, grouped: boolean): boolean {
  return grouped || vote.outcome !== 'held';
}

/** What the votes of an extension round say. */
export type ExtendVerdict =
  | 'extended'
  /** Too few masters can still hold the key: the lock is gone. */
  | 'lost'
  /** The lock's validity ended while the round ran. */
  | 'expired'
  /** A quorum agreed but no validity is left for the new ttl. */
  | 'validity-exhausted'
  /** Too few masters answered in time; the lock keeps its old validity. */
  | 'unavailable';

/**
 * "Extension". `blocked`: masters that cannot count before the lock's next successful extension
 * (another holder's key, or ours put back by a repair — see repair.ts); `end` the monotonic time
 * the round ended, `deadline` the lock's current validity deadline, `validity` what the new ttl
 * leaves (step 2).
 */
export function extendVerdict(r: {
  ok: number;
  blocked: number;
  masters: number;
  quorum: number;
  end: number;
  deadline: number;
  validity: number;
}): ExtendVerdict {
  if (r.ok >= r.quorum && r.end < r.deadline && r.validity > 0) return 'extended';
  if (r.masters - r.blocked < r.quorum) return 'lost';
  if (r.end >= r.deadline) return 'expired';
  return r.ok >= r.quorum ? 'validity-exhausted' : 'unavailable';
}

/** What a release achieved on each master. */
export interface ReleaseResult {
  /**
   * Masters that deleted at least one of the lock's keys (after a local hand-over: where the
   * next holder took them over).
   */
  readonly deleted: number;
  /**
   * `true` when every master answered in time and deleted its key or had nothing of ours to
   * delete (expired, never set); `false` when a master failed or did not answer within the
   * request timeout (its key, if any, expires with its ttl).
   */
  readonly complete: boolean;
  /** Per-master outcomes: `ok` = deleted, `held` = nothing of ours there (expired or never set). */
  readonly votes: readonly NodeVote[];
}

/** The result of a compare-and-delete round ("One master": release). */
export function releaseSummary(votes: readonly NodeVote[], ok: number): ReleaseResult {
  return {
    deleted: ok,
    complete: votes.every((v) => v.outcome === 'ok' || v.outcome === 'held'),
    votes,
  };
}
