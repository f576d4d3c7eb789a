/**
 * Fencing tokens over a quorum (why fencing: docs/REDLOCK.md, "Clocks" — a paused holder can
 * outlive its validity; the counters themselves: lib/core/scripts/fencing.ts): every acquire
 * increments, on the masters it reaches, the counter that serves each of its resources — one
 * counter per Cluster slot, shared by the resources of that slot (lib/core/keys.ts `fenceKey`);
 * the token of a granted lock is the largest counter per resource among the masters that granted
 * it. Any later grant of the same resource meets this one's quorum on at least one master, whose
 * counter only grew since (sharing it with other resources adds increments, never takes one
 * away), so the later token is larger — provided a quorum holds the token: when the masters at
 * the largest value are fewer than a quorum, the counters are first raised (set-if-greater) on
 * every master and a quorum must confirm.
 */

/** Counters per resource (same order as the lock's resources) reported by one master. */
export type Counters = readonly number[];

/**
 * The token per resource (in the order of `resources`) for a grant whose masters reported
 * `counters` (undefined for masters that did not grant), and whether a quorum already holds it.
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
  atMax: (c: Counters | undefined) => boolean;
} {
  const m = resources.length;
  const tokens = new Array<number>(m);
  for (let j = 0; j < m; j++) {
    let max = 0;
    for (const c of counters) if (c && c[j] > max) max = c[j];
    tokens[j] = max;
  }
  const atMax = (c: Counters | undefined): boolean => {
    if (!c) return false;
    for (let j = 0; j < m; j++) if (c[j] !== tokens[j]) return false;
    return true;
  };
  let holding = 0;
  for (const c of counters) if (atMax(c)) holding++;
  return { tokens, settled: holding >= quorum, atMax };
}
