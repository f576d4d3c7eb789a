/**
 * Quorum rules of the lock kinds (lib/core/quorum/kind-rules.ts): the closed forms checked
 * against the definition, and the semaphore rule checked against brute force: with q votes no
 * n + 1 holders fit under the per-master limit, with q − 1 they do (and we build them).
 */
import { InvalidArgumentError } from '../../lib/core/base/errors';
import {
  canGrantWith,
  isGrantable,
  isSafeSharedQuorum,
  majorityQuorum,
  semaphoreFaultTolerance,
  semaphoreQuorum,
  sharedQuorums,
} from '../../lib/core/quorum/kind-rules';

/** Smallest q with (n + 1)·q > n·N, by counting up (the definition, no formula). */
function smallestQuorumByDefinition(N: number, n: number): number {
  let q = 1;
  while ((n + 1) * q <= n * N) q++;
  return q;
}

/** Per-master holder counts of an assignment (holder → masters). */
function loads(N: number, assignment: number[][]): number[] {
  const load = new Array<number>(N).fill(0);
  for (const masters of assignment) for (const m of masters) load[m]++;
  return load;
}

/** Whether every holder sits on `votes` distinct masters and no master holds more than `n`. */
function fitsUnderLimit(N: number, n: number, votes: number, assignment: number[][]): boolean {
  return (
    assignment.every((ms) => ms.length === votes && new Set(ms).size === votes) &&
    loads(N, assignment).every((l) => l <= n)
  );
}

/** All `k`-subsets of 0..N−1. */
function subsets(N: number, k: number): number[][] {
  const out: number[][] = [];
  const pick = (start: number, acc: number[]): void => {
    if (acc.length === k) {
      out.push([...acc]);
      return;
    }
    for (let m = start; m < N; m++) pick(m + 1, [...acc, m]);
  };
  pick(0, []);
  return out;
}

/**
 * Whether some assignment of `holders` holders, each to `votes` distinct masters, keeps every
 * master at or below `n` (exhaustive search with pruning; holders are interchangeable, so their
 * subsets are chosen in non-decreasing order).
 */
function someAssignmentFits(N: number, n: number, votes: number, holders: number): boolean {
  const options = subsets(N, votes);
  const load = new Array<number>(N).fill(0);
  const place = (h: number, from: number): boolean => {
    if (h === holders) return true;
    for (let i = from; i < options.length; i++) {
      const s = options[i];
      if (s.some((m) => load[m] >= n)) continue;
      for (const m of s) load[m]++;
      const ok = place(h + 1, i);
      for (const m of s) load[m]--;
      if (ok) return true;
    }
    return false;
  };
  return place(0, 0);
}

/** The cyclic assignment of the proof: holder j on masters (j·p + t) mod N, t < p. */
function cyclicAssignment(N: number, holders: number, p: number): number[][] {
  return Array.from({ length: holders }, (_, j) =>
    Array.from({ length: p }, (_, t) => (j * p + t) % N),
  );
}

describe('semaphore quorum table, N = 1..9, n = 1..10', () => {
  const cases: [number, number][] = [];
  for (let N = 1; N <= 9; N++) for (let n = 1; n <= 10; n++) cases.push([N, n]);

  it.each(cases)('N=%i n=%i', (N, n) => {
    const q = semaphoreQuorum(N, n);
    expect(q).toBe(smallestQuorumByDefinition(N, n));
    expect((n + 1) * q).toBeGreaterThan(n * N); // enough
    expect((n + 1) * (q - 1)).toBeLessThanOrEqual(n * N); // one fewer is not
    expect(q).toBeLessThanOrEqual(N);
    expect(isGrantable(N, n)).toBe(true);
    expect(semaphoreFaultTolerance(N, n)).toBe(N - q);
    expect(semaphoreFaultTolerance(N, n)).toBe(Math.ceil(N / (n + 1)) - 1);
    expect(q === N).toBe(n >= N - 1); // no master may be down exactly when n ≥ N − 1
    expect(canGrantWith(N, n, q)).toBe(true);
    expect(canGrantWith(N, n, q - 1)).toBe(false);
    if (n === 1) expect(q).toBe(majorityQuorum(N));
  });

  it('matches hand-computed values', () => {
    // rows N = 3, 5, 7; columns n = 1..5
    const expected: Record<number, number[]> = {
      3: [2, 3, 3, 3, 3],
      5: [3, 4, 4, 5, 5],
      7: [4, 5, 6, 6, 6],
    };
    for (const [N, row] of Object.entries(expected)) {
      expect(row.map((_, i) => semaphoreQuorum(Number(N), i + 1))).toEqual(row);
    }
    expect([1, 2, 3, 4, 5].map((n) => semaphoreFaultTolerance(5, n))).toEqual([2, 1, 1, 0, 0]);
  });
});

describe('semaphore quorum against brute force, N ≤ 7, n ≤ 4', () => {
  const cases: [number, number][] = [];
  for (let N = 1; N <= 7; N++) for (let n = 1; n <= 4; n++) cases.push([N, n]);

  it.each(cases)('N=%i n=%i', (N, n) => {
    const q = semaphoreQuorum(N, n);
    // Sufficiency: no n + 1 holders with q votes each fit under the limit.
    expect(someAssignmentFits(N, n, q, n + 1)).toBe(false);
    // Necessity: with q − 1 votes they do; the proof's cyclic assignment is such a witness.
    const p = q - 1;
    expect(someAssignmentFits(N, n, p, n + 1)).toBe(true);
    const witness = cyclicAssignment(N, n + 1, p);
    expect(fitsUnderLimit(N, n, p, witness)).toBe(true);
  });

  it('the brute force itself finds a violation when one exists (it can fail)', () => {
    // A majority (3 of 5) with limit 2 lets 3 holders in; 3 of 3 with limit 1 does not.
    expect(someAssignmentFits(5, 2, 3, 3)).toBe(true);
    expect(someAssignmentFits(3, 1, 3, 2)).toBe(false);
    expect(
      fitsUnderLimit(3, 1, 2, [
        [0, 1],
        [1, 2],
      ]),
    ).toBe(false);
  });
});

describe("the issue's example: N = 5, limit 2", () => {
  it('needs 4 votes, and 3 votes let a third holder in', () => {
    expect(semaphoreQuorum(5, 2)).toBe(4);
    expect(majorityQuorum(5)).toBe(3);
    // masters 1..5 as 0..4: A on 1,2,3; B on 1,4,5; C on 2,3,4
    const abc = [
      [0, 1, 2],
      [0, 3, 4],
      [1, 2, 3],
    ];
    expect(fitsUnderLimit(5, 2, 3, abc)).toBe(true);
    expect(Math.max(...loads(5, abc))).toBe(2);
    // With 4 votes each, 3 holders are 12 memberships on 5 masters: some master has 3.
    expect(someAssignmentFits(5, 2, 4, 3)).toBe(false);
    // One master down still grants (4 of 5), two down do not.
    expect(semaphoreFaultTolerance(5, 2)).toBe(1);
    expect(canGrantWith(5, 2, 4)).toBe(true);
    expect(canGrantWith(5, 2, 3)).toBe(false);
  });
});

describe('shared quorums', () => {
  it('is a majority for readers and writers, and safe', () => {
    for (let N = 1; N <= 9; N++) {
      const { reader, writer } = sharedQuorums(N);
      expect(reader).toBe(Math.floor(N / 2) + 1);
      expect(writer).toBe(reader);
      expect(isSafeSharedQuorum(N, reader, writer)).toBe(true);
      // One writer vote fewer lets two writers miss each other; one reader vote fewer lets a
      // reader miss a writer unless N is even (N/2 readers + N/2 + 1 writers still meet).
      if (reader > 1) expect(isSafeSharedQuorum(N, reader - 1, writer)).toBe(N % 2 === 0);
      if (writer > 1) expect(isSafeSharedQuorum(N, reader, writer - 1)).toBe(false);
    }
  });

  it('accepts other safe splits and rejects unsafe ones', () => {
    expect(isSafeSharedQuorum(5, 1, 5)).toBe(true); // read-one, write-all
    expect(isSafeSharedQuorum(5, 2, 3)).toBe(false); // 2 + 3 = 5: may miss
    expect(isSafeSharedQuorum(5, 3, 2)).toBe(false); // two writers may miss
    expect(isSafeSharedQuorum(5, 6, 3)).toBe(false); // more than N
  });
});

describe('invalid input', () => {
  it.each([
    () => semaphoreQuorum(0, 1),
    () => semaphoreQuorum(5, 0),
    () => semaphoreQuorum(5, 1.5),
    () => semaphoreQuorum(Number.NaN, 1),
    () => majorityQuorum(-1),
    () => canGrantWith(5, 2, 6),
    () => canGrantWith(5, 2, -1),
  ])('throws InvalidArgumentError (%#)', (f) => {
    expect(f).toThrow(InvalidArgumentError);
  });
});
