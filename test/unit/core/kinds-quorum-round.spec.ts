/**
 * The quorum round and the protocol's decisions for the holder kinds (pure logic, no Redis):
 * every pattern of grant / refuse / mismatch-free timeout / error over 1–5 masters, for the
 * semaphore's quorum floor(N·n/(n+1)) + 1 and the shared lock's (the configured, a majority).
 */
import { SHARED, semaphoreKind } from '../../../lib/core/redis/kinds/holders';
import { lockKindFor } from '../../../lib/core/redis/store';
import { MUTEX } from '../../../lib/core/redis/kinds/mutex';
import { majorityQuorum, semaphoreQuorum } from '../../../lib/core/quorum/kind-rules';
import { acquireVerdict } from '../../../lib/core/quorum/protocol';
import { runRound } from '../../../lib/core/quorum/round';
import type { Voter } from '../../../lib/core/quorum/round';

type Answer = 'grant' | 'refuse' | 'timeout' | 'error';
const ANSWERS: readonly Answer[] = ['grant', 'refuse', 'timeout', 'error'];

function* patterns(n: number): Generator<Answer[]> {
  if (n === 0) {
    yield [];
    return;
  }
  for (const rest of patterns(n - 1)) for (const a of ANSWERS) yield [...rest, a];
}

const never = new Promise<never>(() => undefined);

function round(pattern: readonly Answer[], quorum: number) {
  const masters: Voter[] = pattern.map((_, i) => ({ index: i, name: `m${i}` }));
  return runRound<Voter, boolean>({
    masters,
    quorum,
    timeout: 1,
    waitAll: true,
    send: (m) => {
      const a = pattern[m.index];
      if (a === 'timeout') return never;
      if (a === 'error') return Promise.reject(new Error('ECONNREFUSED'));
      return Promise.resolve(a === 'grant');
    },
    judge: (granted) => (granted ? 'ok' : 'held'),
    describeError: (err) => (err as Error).message,
  });
}

describe('each kind states its quorum', () => {
  it('mutex and shared: the configured one; semaphore: max(configured, its rule)', () => {
    for (let n = 1; n <= 9; n++) {
      const majority = majorityQuorum(n);
      expect(MUTEX.quorum(n, majority)).toBe(majority);
      expect(SHARED.quorum(n, majority)).toBe(majority);
      for (let limit = 1; limit <= 6; limit++) {
        const rule = semaphoreQuorum(n, limit);
        expect(semaphoreKind(limit).quorum(n, majority)).toBe(Math.max(majority, rule));
        expect(semaphoreKind(limit).quorum(n, n)).toBe(n); // a stricter configured quorum wins
      }
    }
    expect(semaphoreKind(2).quorum(5, 3)).toBe(4); // 4 of 5, not a majority
    expect(lockKindFor({ name: 'semaphore', limit: 3 })).toBe(semaphoreKind(3));
    expect(lockKindFor(undefined)).toBe(MUTEX);
    expect(lockKindFor({ name: 'shared' })).toBe(SHARED);
  });
});

describe('semaphore quorum over every pattern of 1–5 masters', () => {
  for (let masters = 1; masters <= 5; masters++) {
    for (const limit of [1, 2, 3, 4]) {
      it(`N = ${masters}, limit ${limit}`, async () => {
        const q = semaphoreKind(limit).quorum(masters, majorityQuorum(masters));
        for (const pattern of patterns(masters)) {
          const tally = await round(pattern, q);
          const grants = pattern.filter((a) => a === 'grant').length;
          const usable = pattern.filter((a) => a === 'grant' || a === 'refuse').length;
          const verdict = acquireVerdict(tally.votes, tally.ok, q);
          const expected =
            grants >= q
              ? 'quorum'
              : usable >= q && pattern.includes('refuse')
                ? 'contended'
                : 'unavailable';
          if (verdict !== expected) {
            throw new Error(`${pattern.join(',')} (q=${q}): ${verdict}, expected ${expected}`);
          }
        }
      });
    }
  }
});
