/**
 * An engine whose own callers keep a resource (its queue hands it from one to the next) and a
 * waiter of another engine (policy/fifo-queue.ts `refused`): once the waiter is refused by two
 * holders of that engine in a row, it polls at its retry delay instead of attempting at every
 * one of that engine's releases — each of which it would lose. On 5 real masters; the waiter's
 * links are 3 ms slower each way (TCP delay proxies), so that the keeper's hand-over always
 * comes first.
 */
import { Redis } from 'ioredis';
import { Redlock } from '../../lib/core/redlock';
import type { Lock } from '../../lib/core/lock';
import { monotonicNow } from '../../lib/core/clock';
import { DelayProxy } from '../harness/delay-proxy';
import { RedisMasters } from '../harness/redis-masters';
import { SUITE_DEFAULTS, observedStore, useMasters } from '../harness/engines';
import { sleep, uniqueResource, waitUntil } from '../harness/util';

const suite = useMasters(5);
const RETRY_DELAY = 100;

it('a waiter does not attempt at every release of an engine that hands the resource on', async () => {
  const proxies = await Promise.all(
    suite.masters.masters.map((m) => DelayProxy.start(m.port, { up: 3, down: 3 })),
  );
  const slow = proxies.map((p) => {
    const c = new Redis({ host: '127.0.0.1', port: p.port, maxRetriesPerRequest: 0 });
    c.on('error', () => undefined);
    return c;
  });
  const keeper = new Redlock(suite.clients, { ...SUITE_DEFAULTS, retryCount: 1_000 });
  let attempts = 0;
  const waiter = new Redlock(
    observedStore(slow, () => attempts++),
    { ...SUITE_DEFAULTS, retryCount: 6, retryDelay: RETRY_DELAY, retryJitter: 0 },
  );
  let stop = false;
  let grants = 0;
  const r = uniqueResource('handing');
  const loop = async (): Promise<void> => {
    while (!stop) {
      const lock: Lock = await keeper.acquire(r, { ttl: 5_000 });
      grants++;
      await sleep(2);
      await lock.release();
    }
  };
  let callers: Promise<void>[] = [];
  try {
    await RedisMasters.ready(slow);
    callers = [loop(), loop()];
    await waitUntil(() => grants >= 5, 5_000);
    const started = monotonicNow();
    const got = await waiter.acquire(r, { ttl: 5_000 }).catch(() => undefined);
    const elapsed = monotonicNow() - started;
    await got?.release();
    // Its first refusal, the retry once its release watch is up, the attempt woken by the
    // keeper's release, then one per retry delay. (Without the rule: one attempt per keeper
    // release, its retries spent within a few of the keeper's 2 ms holds.)
    expect(attempts).toBeLessThanOrEqual(3 + Math.ceil(elapsed / RETRY_DELAY));
  } finally {
    stop = true;
    await Promise.all(callers);
    await Promise.all([keeper.close(), waiter.close()]);
    for (const c of slow) c.disconnect();
    await Promise.all(proxies.map((p) => p.close()));
  }
});
