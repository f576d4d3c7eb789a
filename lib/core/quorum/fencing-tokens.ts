/**
 * Fencing tokens over a quorum (why fencing: docs/REDLOCK.md, "Clocks" — a paused holder can
 * outlive its validity; the counters themselves: lib/core/scripts/mutex.ts): every acquire increments a counter per resource on the masters it
 * reaches; the token of a granted lock is the largest counter per resource among the masters that
 * granted it. Any later grant meets this one's quorum on at least one master, whose counter is
 * then already at least the token — provided a quorum holds the token: when the masters at the
 * largest value are fewer than a quorum, the counters are first raised (set-if-greater) on every
 * master and a quorum must confirm.
 */

/** Counters per resource (same order as the lock's resources) reported by one master. */
export type Counters = readonly number[];

/**
 * The token per resource for a grant whose masters reported `counters` (undefined for masters
 * that did not grant), and whether a quorum already holds it.
 */
export function fencingTokensOf(
  counters: readonly (Counters | undefined)[],
  resources: readonly string[],
  quorum: number,
): {
  tokens: Record<string, number>;
  settled: boolean;
  atMax: (c: Counters | undefined) => boolean;
} {
  const max = resources.map((_, j) => {
    let m = 0;
    for (const c of counters) if (c && c[j] > m) m = c[j];
    return m;
  });
  const atMax = (c: Counters | undefined): boolean => !!c && c.every((v, j) => v === max[j]);
  // No prototype: a resource named '__proto__' or 'constructor' is a key like any other.
  const tokens = Object.create(null) as Record<string, number>;
  resources.forEach((r, j) => (tokens[r] = max[j]));
  return { tokens, settled: counters.filter(atMax).length >= quorum, atMax };
}

/**
 * Settles the fencing tokens of a grant: the tokens when a quorum holds them (raising the
 * counters first when needed, by `raise`, which resolves with the number of masters that
 * confirmed), or `null` when a quorum could not confirm.
 */
export async function settleFencingTokens(
  counters: readonly (Counters | undefined)[],
  resources: readonly string[],
  quorum: number,
  raise: (
    tokens: Readonly<Record<string, number>>,
    needs: (i: number) => boolean,
  ) => Promise<number>,
): Promise<Record<string, number> | null> {
  const { tokens, settled, atMax } = fencingTokensOf(counters, resources, quorum);
  if (settled) return tokens;
  const confirmed = await raise(tokens, (i) => !atMax(counters[i]));
  return confirmed >= quorum ? tokens : null;
}
