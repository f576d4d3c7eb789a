/**
 * An acquire granted by a quorum whose fencing counters disagree raises them first
 * (redis/attempt.ts `raiseFences`). The counters must hold the token on as many masters as the
 * store's quorum (every later grant of the resource, of any kind, meets them), also for a
 * semaphore whose own quorum is larger. When too few masters confirm the raise, the attempt is
 * unavailable, and the `NoQuorumError` shows the raise round's votes — not the acquire round's,
 * which were all granted and would read as "every master ok" next to "no quorum".
 */
import { NoQuorumError, Redlock } from '../../lib/core';
import { fenceKey, lockKey } from '../../lib/core/base/keys';
import { FENCE_RAISE_SCRIPT } from '../../lib/core/redis/scripts/fencing';
import { SUITE_DEFAULTS, storeWith, useMasters } from '../harness/engines';
import { uniqueResource } from '../harness/util';

const PREFIX = 'raise:';
const suite = useMasters(5, { keyPrefix: PREFIX });

describe('a fencing raise that too few masters confirm', () => {
  it('is unavailable, with the votes of the raise round', async () => {
    const rl = new Redlock(
      storeWith(suite.clients, (store) => {
        const grouped = store.dispatch.grouped.bind(store.dispatch);
        store.dispatch.grouped = (node, resources, keys, build, wanted) =>
          build(keys, resources, node).script === FENCE_RAISE_SCRIPT
            ? Promise.reject(new Error('raise refused by the test'))
            : grouped(node, resources, keys, build, wanted);
      }),
      { ...SUITE_DEFAULTS, keyPrefix: PREFIX, retryCount: 0 },
    );
    try {
      const r = uniqueResource('raise');
      // Masters 3 and 4 hold the key for someone else: granted by 0–2 only, a bare quorum, so
      // the token is their largest counter — master 0's, far ahead: 1 and 2 must be raised.
      await suite.probe[0].set(fenceKey(PREFIX, r), '9000000000000000', 'PX', 60_000);
      for (const c of suite.probe.slice(3)) await c.set(lockKey(PREFIX, r), 'other', 'PX', 60_000);
      const err = await rl.acquire(r, { ttl: 5_000 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(NoQuorumError);
      const votes = (err as NoQuorumError).votes;
      // Master 0 needed no raise; the round ends once a quorum can no longer confirm (the last
      // master may still be pending then).
      expect(votes[0].outcome).toBe('ok');
      const rest = votes.slice(1).map((v) => v.outcome);
      expect(rest.filter((o) => o === 'error').length).toBeGreaterThanOrEqual(3);
      expect(rest.every((o) => o === 'error' || o === 'pending')).toBe(true);
      expect(votes[1].error).toMatch(/raise refused by the test/);
      // Nothing of the failed attempt is left.
      expect(await Promise.all(suite.probe.map((c) => c.get(lockKey(PREFIX, r))))).toEqual([
        null,
        null,
        null,
        'other',
        'other',
      ]);
    } finally {
      await rl.close();
    }
  });
});

/** An engine that counts the masters each fence raise is sent to. */
function raiseCounting(): { rl: Redlock; raises: number[] } {
  const raises: number[] = [];
  const rl = new Redlock(
    storeWith(suite.clients, (store) => {
      const grouped = store.dispatch.grouped.bind(store.dispatch);
      store.dispatch.grouped = (node, resources, keys, build, wanted) => {
        if (build(keys, resources, node).script === FENCE_RAISE_SCRIPT) raises.push(node.index);
        return grouped(node, resources, keys, build, wanted);
      };
    }),
    { ...SUITE_DEFAULTS, keyPrefix: PREFIX, retryCount: 0 },
  );
  return { rl, raises };
}

describe("a semaphore's fencing token held by the store's quorum of masters", () => {
  it('needs no raise round when 3 of 5 masters hold it (the semaphore itself needs 4 votes)', async () => {
    const { rl, raises } = raiseCounting();
    try {
      const r = uniqueResource('sem-raise');
      const key = lockKey(PREFIX, r);
      // Master 0 is full (two foreign holders): the four others must all admit. Master 1's
      // counter is behind; masters 2–4 are at the largest value: 3 of the 4 granting masters.
      const until = String(Date.now() + 60_000);
      await suite.probe[0].zadd(key, '+inf', '#semaphore:2', until, 'x1', until, 'x2');
      await suite.probe[0].pexpire(key, 60_000);
      await suite.probe[1].set(fenceKey(PREFIX, r), '5', 'PX', 60_000);
      for (const c of suite.probe.slice(2)) await c.set(fenceKey(PREFIX, r), '1000', 'PX', 60_000);
      const lock = await rl.acquire(r, { limit: 2, ttl: 5_000 });
      // Master 0 refuses; the round may end before its reply, once the four others granted.
      expect(['held', 'pending']).toContain(lock.votes[0].outcome);
      expect(lock.votes.slice(1).map((v) => v.outcome)).toEqual(['ok', 'ok', 'ok', 'ok']);
      expect(raises).toEqual([]);
      expect(lock.fencingToken).toBe(1001);
      // The next holder's token is larger, whichever masters admit it.
      const next = await rl.acquire(r, { limit: 2, ttl: 5_000 });
      expect(next.fencingToken).toBeGreaterThan(lock.fencingToken as number);
      await Promise.all([lock.release(), next.release()]);
      await suite.probe[0].del(key);
    } finally {
      await rl.close();
    }
  });
});

describe('a grant whose largest counter is on one master only', () => {
  it('takes a counter held by a quorum when that is safe, and raises nothing', async () => {
    const { rl, raises } = raiseCounting();
    try {
      const r = uniqueResource('drifted');
      const key = lockKey(PREFIX, r);
      // Master 0 is full: masters 1–4 admit, master 1's counter far ahead of the others'. Every
      // earlier token is held by 3 masters, 2 or more of them among these 4, each counting past
      // it: the second largest counter of the 4 is larger than every earlier token, and 3 hold
      // it (the largest is held by one, and would need a raise round on two more).
      const until = String(Date.now() + 60_000);
      await suite.probe[0].zadd(key, '+inf', '#semaphore:2', until, 'x1', until, 'x2');
      await suite.probe[0].pexpire(key, 60_000);
      const start = [0, 900, 500, 500, 500];
      for (let i = 1; i < 5; i++) {
        await suite.probe[i].set(fenceKey(PREFIX, r), String(start[i]), 'PX', 60_000);
      }
      const lock = await rl.acquire(r, { limit: 2, ttl: 5_000 });
      // Master 0 refuses; the round may end before its reply, once the four others granted.
      expect(['held', 'pending']).toContain(lock.votes[0].outcome);
      expect(lock.votes.slice(1).map((v) => v.outcome)).toEqual(['ok', 'ok', 'ok', 'ok']);
      expect(lock.fencingToken).toBe(501);
      expect(raises).toEqual([]);
      const next = await rl.acquire(r, { limit: 2, ttl: 5_000 });
      expect(next.fencingToken).toBe(502);
      await Promise.all([lock.release(), next.release()]);
      await suite.probe[0].del(key);
    } finally {
      await rl.close();
    }
  });
});
