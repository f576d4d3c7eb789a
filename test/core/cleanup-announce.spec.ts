/**
 * Clean-up announcements: the keys of a failed attempt
 * are deleted and announced as `~token`. A waiter refused by one holder with a quorum sleeps
 * until that holder's release — another engine's clean-up does not free the resource and does
 * not wake it (before, every clean-up woke every such waiter for an attempt it could not win:
 * a storm while the lock was held). A waiter refused by split keys, with no holder of a quorum,
 * is woken by the clean-up. A failed attempt that may have been set on a quorum is announced as
 * a release. Against 5 real masters (and TCP delay proxies).
 */
import { describe, expect, it } from '@jest/globals';
import { Redis } from 'ioredis';
import type { Lock } from '../../lib/core/lock/lock';
import { Redlock } from '../../lib/core/redlock';
import { DelayProxy } from '../harness/delay-proxy';
import { SUITE_DEFAULTS, observedStore, useMasters } from '../harness/engines';
import { RedisMasters } from '../harness/redis-masters';
import { sleep, uniqueResource, waitUntil } from '../harness/util';

const suite = useMasters(5);
const closing: Redlock[] = [];
suite.closeFirst(() => Promise.all(closing.map((e) => e.close())));

/** An engine whose store counts its attempts. */
function counted(): { rl: Redlock; attempts: () => number } {
  let attempts = 0;
  const rl = new Redlock(
    observedStore(suite.clients, () => attempts++),
    {
      ...SUITE_DEFAULTS,
      retryCount: 1_000,
    },
  );
  closing.push(rl);
  return { rl, attempts: () => attempts };
}

/** Sets `key` to `value` (10 s) on the masters `at`. */
const hold = (key: string, value: string, at: number[]): Promise<unknown> =>
  Promise.all(at.map((i) => suite.probe[i].set(key, value, 'PX', 10_000)));

/**
 * A waiter on `r` asleep after its refusals: the first, then the retry once its release watch
 * became active (always made: the watch is new), and its attempt count no longer moves. (Waiting
 * for the first alone failed under load: subscribing took longer than the 100 ms of stillness,
 * and the retry came after `before` was read.)
 */
async function asleep(
  rl: Redlock,
  r: string,
  attempts: () => number,
): Promise<{ waiting: Promise<Lock> }> {
  const waiting = rl.acquire(r);
  waiting.catch(() => undefined); // a failed test closes the engine under it
  await waitUntil(() => rl.footprint.handoffChannels === 1, 5_000); // its release watch
  await waitUntil(() => attempts() >= 2, 5_000);
  let seen = -1;
  await waitUntil(async () => {
    const now = attempts();
    const still = now === seen;
    seen = now;
    if (!still) await sleep(100);
    return still;
  }, 5_000);
  return { waiting }; // not the promise itself: an async function would wait for it
}

describe('the clean-up of a failed attempt', () => {
  it('does not wake a waiter refused by one holder with a quorum; the holder’s release does', async () => {
    const { rl, attempts } = counted();
    const r = uniqueResource('one-holder');
    const key = rl.keyOf(r);
    await hold(key, 'someone', [0, 1, 2]);
    const { waiting } = await asleep(rl, r, attempts);
    const before = attempts();
    // Another engine's attempt: refused on 0–2, set on 3–4, cleaned up and announced there.
    const other = suite.engine();
    expect(await other.tryAcquire(r)).toBeNull();
    await sleep(300);
    expect(attempts()).toBe(before);
    // The holder's release wakes it at once (not at its expiry, 10 s away).
    await Promise.all([0, 1, 2].map((i) => suite.probe[i].del(key)));
    await suite.probe[0].publish(key, 'someone');
    const lock = await waiting;
    expect(attempts()).toBe(before + 1);
    await lock.release();
  });

  it('wakes a waiter refused by split keys (no holder with a quorum)', async () => {
    const { rl, attempts } = counted();
    const r = uniqueResource('split');
    const key = rl.keyOf(r);
    await hold(key, 'a', [0, 1]);
    await hold(key, 'b', [2]);
    const { waiting } = await asleep(rl, r, attempts);
    const before = attempts();
    const other = suite.engine();
    expect(await other.tryAcquire(r)).toBeNull(); // set on 3–4, cleaned up, announced
    await waitUntil(() => attempts() > before, 5_000);
    await Promise.all([0, 1, 2].map((i) => suite.probe[i].del(key)));
    await suite.probe[0].publish(key, 'a');
    await (await waiting).release();
  });
});

describe('a failed attempt that may be set on a quorum (its answers came too late)', () => {
  it('is announced as a release: a waiter may have taken it for one holder with a quorum', async () => {
    const proxies = await Promise.all(suite.masters.masters.map((m) => DelayProxy.start(m.port)));
    const clients = proxies.map((p) => {
      const c = new Redis({ host: '127.0.0.1', port: p.port, maxRetriesPerRequest: 0 });
      c.on('error', () => undefined);
      return c;
    });
    const listener = suite.masters.createClients()[0];
    try {
      await RedisMasters.ready([...clients, listener]);
      const rl = new Redlock(clients, { ...SUITE_DEFAULTS, ttl: 5_000, requestTimeout: 100 });
      closing.push(rl);
      const r = uniqueResource('exhausted');
      const heard: string[] = [];
      await listener.subscribe(rl.keyOf(r));
      listener.on('message', (_channel: string, message: string) => heard.push(message));
      // Every master sets the key, but its answer comes after the 100 ms request timeout.
      await (await rl.acquire(uniqueResource('warm-up'))).release(); // scripts loaded
      for (const p of proxies) p.setDelays({ down: 300 });
      await expect(rl.tryAcquire(r)).rejects.toMatchObject({ reason: 'unavailable' });
      await waitUntil(() => heard.length > 0, 5_000);
      expect(heard[0]).toMatch(/^[A-Za-z0-9_-]{39}$/); // the attempt's token, not `~token`
    } finally {
      listener.disconnect();
      for (const c of clients) c.disconnect();
      await Promise.all(proxies.map((p) => p.close()));
    }
  });
});
