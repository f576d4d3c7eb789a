/**
 * The fencing-token rule (lib/core/quorum/protocol.ts `fencingTokensOf`) against a model of the masters'
 * counters: grants one after another (each begins after the previous one's token is held by a
 * quorum), with failed attempts, other resources of the same counter and raise rounds that only
 * some masters confirm in between. Every token must be larger than every earlier one, and be held
 * by a quorum once settled. A rule that takes one counter too many (the (g + q − N + 1)-th
 * largest) is caught by the same model: the check can fail.
 */
import { fencingTokensOf } from '../../../lib/core/quorum/protocol';
import type { Counters } from '../../../lib/core/quorum/protocol';

type Rule = (
  counters: readonly (Counters | undefined)[],
  quorum: number,
) => { token: number; holds: (c: Counters | undefined) => boolean };

const ours: Rule = (counters, quorum) => {
  const f = fencingTokensOf(counters, ['r'], quorum);
  return { token: f.tokens[0], holds: f.holds };
};

/** One counter past the safe one: a rule the model must refute. */
const oneTooMany: Rule = (counters, quorum) => {
  const values = counters.filter((c): c is Counters => c !== undefined).map((c) => c[0]);
  values.sort((a, b) => b - a);
  const k = Math.min(values.length, values.length + quorum - counters.length + 1);
  const token = values[k - 1];
  return { token, holds: (c) => c !== undefined && c[0] >= token };
};

/** A small seeded generator (mulberry32): the same histories on every run. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function pick(rnd: () => number, n: number, size: number): number[] {
  const all = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [all[i], all[j]] = [all[j], all[i]];
  }
  return all.slice(0, size);
}

/** Runs `grants` grants on `n` masters; returns the first violation found, if any. */
function violation(rule: Rule, n: number, grants: number, seed: number): string | undefined {
  const rnd = random(seed);
  const quorum = Math.floor(n / 2) + 1;
  const counter = Array.from({ length: n }, () => Math.floor(rnd() * 50));
  let last = -Infinity;
  for (let g = 0; g < grants; g++) {
    // Noise: failed attempts and other resources of the counter, on random masters.
    for (let k = Math.floor(rnd() * 4); k > 0; k--) {
      for (const i of pick(rnd, n, 1 + Math.floor(rnd() * n))) counter[i]++;
    }
    // A grant on some masters (a semaphore needs more than a quorum), each counting once.
    const size = quorum + Math.floor(rnd() * (n - quorum + 1));
    const granting = pick(rnd, n, size);
    const reported: (Counters | undefined)[] = new Array<Counters | undefined>(n).fill(undefined);
    for (const i of granting) reported[i] = [++counter[i]];
    const { token, holds } = rule(reported, quorum);
    if (!(token > last)) return `grant ${g}: token ${token} after ${last}`;
    // Unless settled, raise (set-if-greater) until a quorum holds the token; a raise may also
    // land on more masters than needed.
    const settled = reported.filter((c) => holds(c)).length >= quorum;
    for (const i of pick(rnd, n, n)) {
      if (counter[i] >= token) continue;
      const held = counter.filter((c) => c >= token).length;
      if ((!settled && held < quorum) || rnd() < 0.2) counter[i] = token;
    }
    if (counter.filter((c) => c >= token).length < quorum) return `grant ${g}: token not held`;
    last = token;
  }
  return undefined;
}

describe('fencing tokens (quorum/protocol.ts `fencingTokensOf`)', () => {
  it.each([3, 5, 7])('grow strictly over any history of grants on %i masters', (n) => {
    for (let seed = 1; seed <= 200; seed++) {
      expect(violation(ours, n, 200, seed)).toBeUndefined();
    }
  });

  it('the model refutes a rule that takes one counter too many', () => {
    const found = [3, 5, 7].some((n) =>
      Array.from({ length: 50 }, (_, s) => s + 1).some((seed) =>
        violation(oneTooMany, n, 200, seed),
      ),
    );
    expect(found).toBe(true);
  });

  it('a grant by every master is settled without a raise, however far its counters drifted', () => {
    const f = fencingTokensOf([[100], [504], [231], [377], [999]], ['r'], 3);
    expect(f.tokens).toEqual([377]); // the third largest: held by 3 masters
    expect(f.settled).toBe(true);
  });

  it('a grant by fewer masters takes a smaller counter and raises the fewest', () => {
    // 4 of 5 granted: at least 2 of them hold every earlier token; the second largest is safe.
    const f = fencingTokensOf([[10], [40], undefined, [30], [20]], ['r'], 3);
    expect(f.tokens).toEqual([30]);
    expect(f.settled).toBe(false);
    expect([[10], [40], undefined, [30], [20]].map((c) => f.holds(c))).toEqual([
      false,
      true,
      false,
      true,
      false,
    ]);
    // A bare quorum granted: the largest, as before.
    const q = fencingTokensOf([[10], [40], undefined, undefined, [20]], ['r'], 3);
    expect(q.tokens).toEqual([40]);
  });

  it('takes the token per resource and holds a master only where every resource is held', () => {
    const f = fencingTokensOf(
      [
        [5, 50],
        [6, 40],
        [7, 30],
        [8, 20],
        [9, 10],
      ],
      ['a', 'b'],
      3,
    );
    expect(f.tokens).toEqual([7, 30]);
    // Only master 2 holds both (0 and 1 hold b, 3 and 4 hold a): raised first.
    expect(
      [0, 1, 2, 3, 4].filter((i) =>
        f.holds(
          [
            [5, 50],
            [6, 40],
            [7, 30],
            [8, 20],
            [9, 10],
          ][i],
        ),
      ),
    ).toEqual([2]);
    expect(f.settled).toBe(false);
  });
});
