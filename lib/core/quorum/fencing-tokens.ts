/**
 * Fencing tokens over a quorum (why fencing: docs/REDLOCK.md, "Clocks" — a paused holder can
 * outlive its validity; the counters themselves: lib/core/scripts/fencing.ts): every acquire
 * increments, on the masters it reaches, the counter that serves each of its resources — one
 * counter per Cluster slot, shared by the resources of that slot (lib/core/keys.ts `fenceKey`);
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
