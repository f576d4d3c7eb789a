/**
 * A refused attempt that set keys on some masters releases them, then waits its random delay
 * (docs/REDLOCK.md, "N masters": step 5, then the retry) — counted from when that clean-up is
 * done (policy/acquire.ts). Contenders whose attempts split then do not race again while
 * their keys are still there: on a latency-skewed semaphore that took the grant rate from
 * 0.7× to about 1× of a plain pigeonhole semaphore (bench/kinds.ts --skew-only).
 */
import { Redlock } from '../../lib/core/redlock';
import { LockContendedError } from '../../lib/core/base/errors';
import { lockKey } from '../../lib/core/base/keys';
import { monotonicNow } from '../../lib/core/base/clock';
import { SUITE_DEFAULTS, observeAttempts, storeWith, useMasters } from '../harness/engines';
import { sleep, uniqueResource } from '../harness/util';

const PREFIX = 'retry-cleanup:';
const suite = useMasters(5, { keyPrefix: PREFIX });
const CLEANUP_TAKES = 250;
const RETRY_DELAY = 100;

describe('the retry after a split attempt', () => {
  it('waits its delay after the clean-up is done, not from the refusal', async () => {
    const attempts: number[] = [];
    const cleanedUp: number[] = [];
    const rl = new Redlock(
      storeWith(suite.clients, (store) => {
        observeAttempts(store, () => attempts.push(monotonicNow()));
        // A slow clean-up (one master answering late, within the request timeout).
        const releaseKeys = store.releaseKeys.bind(store);
        store.releaseKeys = async (resources, token, options) => {
          const result = await releaseKeys(resources, token, options);
          await sleep(CLEANUP_TAKES);
          cleanedUp.push(monotonicNow());
          return result;
        };
      }),
      {
        ...SUITE_DEFAULTS,
        keyPrefix: PREFIX,
        handoff: false, // no announcements: the refused waiter sleeps its retry delay
        retryCount: 1,
        retryDelay: RETRY_DELAY,
        retryJitter: 0,
      },
    );
    try {
      const r = uniqueResource('split');
      const key = lockKey(PREFIX, r);
      // Three masters held by three different holders: refused with no holder of a quorum,
      // admitted on masters 3 and 4, whose keys are cleaned up.
      await Promise.all([0, 1, 2].map((i) => suite.probe[i].set(key, `other-${i}`, 'PX', 10_000)));
      const err = await rl.acquire(r, { ttl: 5_000 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(LockContendedError);
      expect(attempts).toHaveLength(2);
      expect(cleanedUp.length).toBeGreaterThanOrEqual(1);
      // Timers never fire early by more than their 1 ms rounding.
      expect(attempts[1] - cleanedUp[0]).toBeGreaterThanOrEqual(RETRY_DELAY - 2);
      expect(await suite.probe[3].exists(key)).toBe(0);
      await Promise.all([0, 1, 2].map((i) => suite.probe[i].del(key)));
    } finally {
      await rl.close();
    }
  });
});
