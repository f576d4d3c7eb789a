import {
  KindMismatchError,
  LockContendedError,
  LockLostError,
} from '../../../lib/core/base/errors';
import { InMemoryRedlock } from '../../../lib/testing/in-memory-redlock';

/**
 * Shared locks and semaphores in the in-memory engine: the same rules as on Redis
 * (test/core/kinds-engine.spec.ts), without Redis.
 */
describe('InMemoryRedlock: shared locks and semaphores', () => {
  let engine: InMemoryRedlock;

  beforeEach(() => {
    engine = new InMemoryRedlock({ retryDelay: 10, retryJitter: 0 });
  });

  afterEach(async () => {
    await engine.close();
  });

  it('readers together, the writer excluded, and vice versa', async () => {
    const readers = await Promise.all([1, 2, 3].map(() => engine.acquire('doc', { shared: true })));
    expect(readers.map((l) => l.kind)).toEqual(['shared', 'shared', 'shared']);
    expect(engine.holdersOf('doc')).toHaveLength(3);
    expect(await engine.tryAcquire('doc')).toBeNull();
    await Promise.all(readers.map((l) => l.release()));
    const writer = await engine.acquire('doc');
    expect(await engine.tryAcquire('doc', { shared: true })).toBeNull();
    await writer.release();
    expect(engine.isHeld('doc')).toBe(false);
  });

  it('a waiting writer holds back new readers until the readers drain', async () => {
    const reader = await engine.acquire('doc', { shared: true, ttl: 5000 });
    const writer = engine.acquire('doc', { retryCount: 1000, waitTimeout: 3000 });
    await new Promise((r) => setTimeout(r, 30)); // the writer was refused at least once
    expect(await engine.tryAcquire('doc', { shared: true })).toBeNull();
    await reader.release();
    const w = await writer;
    expect(w.kind).toBe('mutex');
    await w.release();
  });

  it('the writer-waiting flag ends with its writer: granted, or given up', async () => {
    const reader = await engine.acquire('doc', { shared: true, ttl: 5000 });
    // Gives up while the reader holds: readers come in again at once.
    await expect(engine.acquire('doc', { waitTimeout: 50 })).rejects.toThrow();
    const second = await engine.tryAcquire('doc', { shared: true });
    expect(second).not.toBeNull();
    await second?.release();
    // Granted once the reader left, held and released: readers come in at once.
    const writer = engine.acquire('doc', { retryCount: 1000, waitTimeout: 3000 });
    await new Promise((r) => setTimeout(r, 30)); // the writer was refused at least once
    await reader.release();
    const w = await writer;
    await w.release();
    const third = await engine.tryAcquire('doc', { shared: true });
    expect(third).not.toBeNull();
    await third?.release();
  });

  it('a semaphore admits `limit` holders; the next waits for a slot', async () => {
    const a = await engine.acquire('exports', { limit: 2 });
    const b = await engine.acquire('exports', { limit: 2 });
    expect([a.limit, b.limit]).toEqual([2, 2]);
    await expect(engine.acquire('exports', { limit: 2, retryCount: 0 })).rejects.toBeInstanceOf(
      LockContendedError,
    );
    const c = engine.acquire('exports', { limit: 2, retryCount: 1000, waitTimeout: 3000 });
    await a.release();
    await (await c).release();
    await b.release();
  });

  it('mixing kinds is a KindMismatchError at once, also through using()', async () => {
    const sem = await engine.acquire('r', { limit: 2 });
    for (const ask of [{}, { shared: true }, { limit: 3 }]) {
      const err = await engine
        .acquire('r', { ...ask, retryCount: 100, retryDelay: 1000 })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(KindMismatchError);
      expect((err as KindMismatchError).attempts).toBe(1);
    }
    await expect(engine.using('r', () => 1)).rejects.toBeInstanceOf(KindMismatchError);
    await sem.release();
    const reader = await engine.acquire('r', { shared: true });
    await expect(engine.acquire('r', { limit: 2 })).rejects.toMatchObject({
      found: { kind: 'shared' },
    });
    await reader.release();
  });

  it('extends a membership, and loseLock() aborts every holder', async () => {
    const a = await engine.acquire('r', { shared: true, ttl: 1000 });
    const b = await engine.acquire('r', { shared: true, ttl: 1000 });
    await a.extend(5000);
    expect(a.remainingValidity).toBeGreaterThan(2000);
    engine.loseLock('r');
    expect(a.signal.reason).toBeInstanceOf(LockLostError);
    expect(b.signal.aborted).toBe(true);
    await expect(a.extend()).rejects.toBeInstanceOf(LockLostError);
  });

  it('hold() blocks every kind as contention, not as a mismatch', async () => {
    engine.hold('r', 5000);
    expect(await engine.tryAcquire('r', { shared: true })).toBeNull();
    expect(await engine.tryAcquire('r', { limit: 3 })).toBeNull();
    engine.free('r');
    const l = await engine.acquire('r', { limit: 3 });
    await l.release();
  });
});
