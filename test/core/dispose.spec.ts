/**
 * `await using` (lock/lock.ts `[Symbol.asyncDispose]`) against real redis-server masters: the keys are
 * gone once the block ends, also when it throws; every kind of lock; a lock that was already
 * released disposes without sending anything again, one that expired or was lost disposes
 * quietly and its release is reported through the engine's events as a normal release is.
 */
import { InvalidArgumentError, LockLostError } from '../../lib/core/base/errors';
import type { RedlockEvent } from '../../lib/core/lock/events';
import { Lock } from '../../lib/core/lock/lock';
import type { Redlock } from '../../lib/core/redlock';
import { InMemoryRedlock } from '../../lib/testing/in-memory-redlock';
import { useMasters } from '../harness/engines';
import { uniqueResource, valuesOn, waitUntil } from '../harness/util';

const suite = useMasters(3);

/** The events of `engine` (from now on). */
function recorded(engine: Redlock): RedlockEvent[] {
  const events: RedlockEvent[] = [];
  engine.observe((e) => events.push(e));
  return events;
}

const types = (events: RedlockEvent[]): string[] => events.map((e) => e.type);

/** Waits until no master has `key` (every release waits for every master; this only bounds it). */
const goneEverywhere = (key: string): Promise<void> =>
  waitUntil(async () => (await valuesOn(suite.probe, key)).every((v) => v === null));

describe('await using', () => {
  it('releases the lock when the block ends: its keys are gone on every master', async () => {
    const redlock = suite.engine();
    const events = recorded(redlock);
    const r = uniqueResource('dispose-block');
    const key = redlock.keyOf(r);
    let held: Lock | undefined;
    {
      await using lock = await redlock.acquire(r, { ttl: 30_000 });
      held = lock;
      await waitUntil(async () =>
        (await valuesOn(suite.probe, key)).every((v) => v === lock.value),
      );
      expect(lock.released).toBe(false);
    }
    expect(held.released).toBe(true);
    await goneEverywhere(key); // long before the 30 s ttl could explain it
    expect(types(events)).toEqual(['acquired', 'released']);
    expect(await redlock.isLocked(r)).toBe(false);
  });

  it('releases the lock when the block throws, and the block’s own error comes out', async () => {
    const redlock = suite.engine();
    const r = uniqueResource('dispose-throw');
    let held: Lock | undefined;
    const failing = async (): Promise<void> => {
      await using lock = await redlock.acquire(r, { ttl: 30_000 });
      held = lock;
      throw new Error('the work failed');
    };
    const err = await failing().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toBe('the work failed'); // not a SuppressedError
    expect(held?.released).toBe(true);
    await goneEverywhere(redlock.keyOf(r));
  });

  it.each([
    ['a shared lock', { shared: true }],
    ['a semaphore slot', { limit: 2 }],
  ] as const)('releases %s', async (_, kind) => {
    const redlock = suite.engine();
    const r = uniqueResource('dispose-kind');
    {
      await using lock = await redlock.acquire(r, { ttl: 30_000, ...kind });
      expect(lock.kind).toBe('shared' in kind ? 'shared' : 'semaphore');
      expect((await redlock.inspect(r)).holders).toBe(1);
    }
    await waitUntil(async () => (await redlock.inspect(r)).holders === 0);
    // Free at once for a plain lock (not left to expire).
    const next = await redlock.tryAcquire(r, { ...kind });
    expect(next).not.toBeNull();
    await next?.release();
  });

  it('disposes a lock released in the block quietly, sending nothing again (kept keys stay)', async () => {
    const redlock = suite.engine();
    const events = recorded(redlock);
    const r = uniqueResource('dispose-released');
    const key = redlock.keyOf(r);
    let value = '';
    {
      await using lock = await redlock.acquire(r, { ttl: 30_000 });
      value = lock.value;
      // Released early with lockAtLeastFor: the keys are kept for the period. A second release
      // (without the option) would delete them.
      await lock.release({ lockAtLeastFor: 20_000 });
    }
    expect((await valuesOn(suite.probe, key)).filter((v) => v === value).length).toBeGreaterThan(1);
    expect(types(events)).toEqual(['acquired', 'released']); // one release, reported once
    expect(await redlock.isLocked(r)).toBe(true);
  });

  it('disposes a lock whose validity ran out quietly, and reports it lost, then released', async () => {
    const redlock = suite.engine();
    const events = recorded(redlock);
    const r = uniqueResource('dispose-expired');
    let held: Lock | undefined;
    {
      await using lock = await redlock.acquire(r, { ttl: 200 });
      held = lock;
      await waitUntil(() => !lock.isValid);
    }
    expect(held.released).toBe(true);
    expect(types(events)).toEqual(['acquired', 'lost', 'released']);
    const released = events[2];
    if (released.type !== 'released') throw new Error('expected a released event');
    expect(released.lock).toBe(held);
    expect(released.result.votes).toHaveLength(3);
  });

  it('disposes a lost lock quietly and reports its release with what each master did', async () => {
    const redlock = suite.engine();
    const events = recorded(redlock);
    const r = uniqueResource('dispose-lost');
    const key = redlock.keyOf(r);
    let held: Lock | undefined;
    {
      await using lock = await redlock.acquire(r, { ttl: 30_000 });
      held = lock;
      // Someone deleted the keys: the next extension finds the lock lost.
      await Promise.all(suite.probe.map((c) => c.del(key)));
      await expect(lock.extend()).rejects.toBeInstanceOf(LockLostError);
      expect(lock.signal.aborted).toBe(true);
    }
    expect(held.released).toBe(true);
    expect(types(events)).toEqual(['acquired', 'lost', 'released']);
    const released = events[2];
    if (released.type !== 'released') throw new Error('expected a released event');
    expect(released.result.votes).toHaveLength(3);
    await goneEverywhere(key); // whatever the failed extension's repair may have put back
  });
});

it('refuses to dispose of something that is not a lock an engine granted', async () => {
  const forged = Object.create(Lock.prototype) as Lock;
  await expect(forged[Symbol.asyncDispose]()).rejects.toBeInstanceOf(InvalidArgumentError);
});

describe('await using on the in-memory engine (nestjs-redlock/testing)', () => {
  it('releases the lock when the block ends', async () => {
    const redlock = new InMemoryRedlock();
    const r = uniqueResource('dispose-memory');
    {
      await using lock = await redlock.acquire(r);
      expect(lock.isValid).toBe(true);
      expect(await redlock.isLocked(r)).toBe(true);
    }
    expect(await redlock.isLocked(r)).toBe(false);
    await redlock.close();
  });
});
