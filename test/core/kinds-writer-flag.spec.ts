/**
 * The writer-waiting flag ends with its writer (redis/kinds/writer-flag.ts, docs/lock-kinds.md "Writer
 * starvation policy"), on 3 real masters: granted, the writer deletes it where it holds the key,
 * and the readers come back at its release announcement; gave up, its engine takes it down. Before,
 * the flag lived until the readers it had waited for would have expired (their whole ttl), and no
 * reader got in meanwhile although the writer had come and gone.
 */
import type { Redis } from 'ioredis';
import { WaitTimeoutError } from '../../lib/core/base/errors';
import { waitKey } from '../../lib/core/base/keys';
import type { Lock } from '../../lib/core/lock/lock';
import type { Redlock } from '../../lib/core/redlock';
import { RedisMasters } from '../harness/redis-masters';
import { useMasters } from '../harness/engines';
import { sleep, uniqueResource, waitUntil } from '../harness/util';

const suite = useMasters(3, { retryDelay: 25, retryJitter: 15 });

/**
 * An engine on its own connections (as another process would be), its masters checked first: a
 * fresh engine's first acquire waits for each master's check (redis/masters/master-checks.ts),
 * and a round decided before a slow check answered leaves that master out — under load a
 * writer's first refusal left no flag on one master and the writer slept until the reader's
 * release (seen once in a full run).
 */
async function own(): Promise<Redlock> {
  const clients = suite.masters.createClients();
  await RedisMasters.ready(clients);
  return suite.checkedEngine({}, clients);
}

/** Whether the writer-waiting flag of `resource` exists, per master. */
async function flags(rl: Redlock, resource: string): Promise<boolean[]> {
  const key = waitKey(rl.settings.keyPrefix, resource);
  return Promise.all(suite.probe.map(async (c: Redis) => (await c.exists(key)) === 1));
}

/** Loops shared acquires (ttl 3 s, holds of 250–400 ms) until `stop`; records grant times. */
async function readerLoop(
  rl: Redlock,
  resource: string,
  stop: { done: boolean },
  grants: number[],
): Promise<void> {
  while (!stop.done) {
    let lock: Lock | undefined;
    try {
      lock = await rl.acquire(resource, { shared: true, ttl: 3000, waitTimeout: 5000 });
    } catch {
      continue; // refused for longer than its wait: try again
    }
    grants.push(performance.now());
    await sleep(250 + Math.random() * 150);
    await lock.release().catch(() => undefined);
  }
}

it('a granted writer ends its flag: readers resume at its release', async () => {
  const readers = await Promise.all([own(), own(), own()]);
  const writer = await own();
  const resource = uniqueResource('writer-granted');
  const stop = { done: false };
  const grants: number[] = [];
  const loops = readers.map((rl) => readerLoop(rl, resource, stop, grants));
  try {
    await waitUntil(() => grants.length >= 3, 10_000);
    // The writer gets in (readers drain behind its flag), holds 300 ms and releases.
    const lock = await writer.acquire(resource, { ttl: 3000, waitTimeout: 10_000 });
    const holding = await Promise.all(
      suite.probe.map(async (c) => (await c.get(writer.keyOf(resource))) === lock.value),
    );
    const flagged = await flags(writer, resource);
    // Where the writer holds the key, its flag is gone (readers are refused by the key itself).
    expect(flagged.filter((f, i) => f && holding[i])).toEqual([]);
    await sleep(300);
    await lock.release();
    const released = performance.now();
    // At once, a reader of a fourth engine gets in: no flag left on a majority.
    const probeReader = await own();
    const reader = await probeReader.tryAcquire(resource, { shared: true, ttl: 3000 });
    expect(reader).not.toBeNull();
    await reader?.release();
    // And the looping readers come back too (woken by the release announcement), long before the
    // old flag's life (the readers' 3 s ttl) would have ended.
    await waitUntil(() => grants.some((t) => t > released), 2000);
  } finally {
    stop.done = true;
    await Promise.all(loops);
  }
});

it('a writer that gives up takes its flag down: readers resume at once', async () => {
  const holder = await own();
  const writer = await own();
  const other = await own();
  const resource = uniqueResource('writer-gave-up');
  const reading = await holder.acquire(resource, { shared: true, ttl: 3000 });
  // Refused by the reader, the writer raises its flag, then gives up.
  await expect(writer.acquire(resource, { ttl: 3000, waitTimeout: 300 })).rejects.toBeInstanceOf(
    WaitTimeoutError,
  );
  // Its engine takes the flag down (best effort, not awaited): well before the reader's 3 s.
  await waitUntil(async () => (await flags(writer, resource)).every((f) => !f), 1500);
  const second = await other.tryAcquire(resource, { shared: true, ttl: 3000 });
  expect(second).not.toBeNull();
  expect(reading.isValid).toBe(true);
  await second?.release();
  await reading.release();
});

it("a writer's give-up leaves another engine's flag up", async () => {
  const holder = await own();
  const waiting = await own();
  const quitter = await own();
  const other = await own();
  const resource = uniqueResource('writer-other-flag');
  const reading = await holder.acquire(resource, { shared: true, ttl: 3000 });
  // A writer of another engine waits (and raised the flag first).
  const waits = waiting.acquire(resource, { ttl: 3000, waitTimeout: 5000 });
  await waitUntil(async () => (await flags(waiting, resource)).every((f) => f), 3000);
  await expect(quitter.acquire(resource, { ttl: 3000, waitTimeout: 200 })).rejects.toBeInstanceOf(
    WaitTimeoutError,
  );
  await sleep(100); // the give-up's script has reached the masters (the flag is not its own)
  expect(await other.tryAcquire(resource, { shared: true })).toBeNull();
  await reading.release();
  const lock = await waits; // the waiting writer gets in once the reader left
  await lock.release();
});
