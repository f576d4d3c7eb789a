import { driftFor } from '../base/clock';
import type { NodeOutcome, NodeVote } from '../base/errors';

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
 * - Fencing ("Clocks": a paused holder can outlive its validity): which counter of a grant is its
 *   token, and whether a raise round must come first ({@link fencingTokensOf}).
 */

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
 * (another holder's key, or ours put back by a repair — see redis/repair.ts); `end` the monotonic time
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

/*
 * Fencing tokens over a quorum (why fencing: docs/REDLOCK.md, "Clocks" — a paused holder can
 * outlive its validity; the counters themselves: lib/core/redis/scripts/fencing.ts): every acquire
 * increments, on the masters it reaches, the counter that serves each of its resources — one
 * counter per Cluster slot, shared by the resources of that slot (lib/core/base/keys.ts `fenceKey`);
 * counters only grow (sharing one with other resources adds increments, never takes one away).
 * A grant's token must be larger than every token granted before it began, and be held (a
 * counter at or above it) by a quorum of masters, so that every later grant meets one of them.
 * Which counter of the grant is the token, and when a raise round (set-if-greater) must come
 * first: {@link fencingTokensOf}.
 */

/** Counters per resource (same order as the lock's resources) reported by one master. */
export type Counters = readonly number[];

/**
 * The token per resource (in the order of `resources`) for a grant whose masters reported
 * `counters` (one entry per master of `counters.length`; undefined for masters that did not
 * grant), and whether a quorum already holds it (`holds`: a counter at or above the token for
 * every resource).
 *
 * The token is not always the largest counter: with g granting masters out of N and a quorum q,
 * any earlier grant's token is held by q masters, at least g + q − N of which granted this one
 * and counted past it — so the (g + q − N)-th largest counter of the grant is larger than every
 * earlier token, and it is held by at least that many masters. When every master granted
 * (g = N) those are q masters: the token is settled without a raise round, however far the
 * counters drifted apart. With fewer grants fewer masters hold it and the rest are raised; the
 * smallest safe token needs the fewest raises. (g + q − N ≥ 1 whenever q is a majority; a
 * quorum below one may give less — no two grants need meet then, nothing is guaranteed, and the
 * largest counter is taken.) `counters` must come from masters that counted after every earlier
 * token was held: a master quarantined after a restart may have lost its counter, so its reply
 * is left out (undefined) by the caller.
 * Checked against a model of seeded random grant histories: test/unit/core/fencing-tokens.spec.ts.
 * An array, not a table keyed by name: nothing here depends on what the names are (a resource
 * named `'__proto__'` is a position like any other), and no object shape is made per name.
 */
export function fencingTokensOf(
  counters: readonly (Counters | undefined)[],
  resources: readonly string[],
  quorum: number,
): {
  tokens: number[];
  settled: boolean;
  holds: (c: Counters | undefined) => boolean;
} {
  const m = resources.length;
  let granted = 0;
  for (const c of counters) if (c) granted++;
  const k = Math.max(1, granted + quorum - counters.length);
  const tokens = new Array<number>(m);
  for (let j = 0; j < m; j++) tokens[j] = kthLargest(counters, j, k);
  const holds = (c: Counters | undefined): boolean => {
    if (!c) return false;
    for (let j = 0; j < m; j++) if (!(c[j] >= tokens[j])) return false;
    return true;
  };
  let holding = 0;
  for (const c of counters) if (holds(c)) holding++;
  return { tokens, settled: holding >= quorum, holds };
}

/**
 * The `k`-th largest counter of resource `j` among the masters that reported one (0 when none
 * did). A plain maximum for k = 1 — the usual case, a bare quorum granting — without an array.
 */
function kthLargest(counters: readonly (Counters | undefined)[], j: number, k: number): number {
  if (k === 1) {
    let max = 0;
    for (const c of counters) if (c && c[j] > max) max = c[j];
    return max;
  }
  const column: number[] = [];
  for (const c of counters) if (c) column.push(c[j]);
  column.sort((a, b) => b - a);
  return column[k - 1] ?? 0;
}
