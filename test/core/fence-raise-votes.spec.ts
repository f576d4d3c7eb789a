/**
 * An acquire granted by a quorum whose fencing counters disagree raises them first
 * (redis-attempt.ts `raiseFences`); when too few masters confirm the raise, the attempt is
 * unavailable, and the `NoQuorumError` shows the raise round's votes — not the acquire round's,
 * which were all granted and would read as "every master ok" next to "no quorum".
 */
import { NoQuorumError, Redlock } from '../../lib/core';
import { fenceKey, lockKey } from '../../lib/core/keys';
import { FENCE_RAISE_SCRIPT } from '../../lib/core/scripts/fencing';
import { SUITE_DEFAULTS, storeWith, useMasters } from '../harness/engines';
import { uniqueResource } from '../harness/util';

const PREFIX = 'raise:';
const suite = useMasters(3, { keyPrefix: PREFIX });

describe('a fencing raise that too few masters confirm', () => {
  it('is unavailable, with the votes of the raise round', async () => {
    const rl = new Redlock(
      storeWith(suite.clients, (store) => {
        const grouped = store.dispatch.grouped.bind(store.dispatch);
        store.dispatch.grouped = (node, resources, keys, build, wanted) =>
          build(keys, resources).script === FENCE_RAISE_SCRIPT
            ? Promise.reject(new Error('raise refused by the test'))
            : grouped(node, resources, keys, build, wanted);
      }),
      { ...SUITE_DEFAULTS, keyPrefix: PREFIX, retryCount: 0 },
    );
    try {
      const r = uniqueResource('raise');
      // Master 0's counter is far ahead: the others must be raised to it before the grant.
      await suite.probe[0].set(fenceKey(PREFIX, r), '9000000000000000', 'PX', 60_000);
      const err = await rl.acquire(r, { ttl: 5_000 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(NoQuorumError);
      const votes = (err as NoQuorumError).votes;
      expect(votes.map((v) => v.outcome)).toEqual(['ok', 'error', 'error']);
      expect(votes[1].error).toMatch(/raise refused by the test/);
      // Nothing of the failed attempt is left.
      expect(await Promise.all(suite.probe.map((c) => c.exists(lockKey(PREFIX, r))))).toEqual([
        0, 0, 0,
      ]);
    } finally {
      await rl.close();
    }
  });
});
