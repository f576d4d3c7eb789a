/**
 * Shared (read) locks and counting semaphores through the engine, against 5 real redis-server
 * masters (docs/lock-kinds.md): readers together, the writer (a plain lock) excluded, writers not
 * starved, at most `limit` semaphore holders, release / extend / hand-off, and the typed error
 * for mixed kinds. Faults: kinds-faults.spec.ts; latency skew: kinds-skew.spec.ts.
 */
import {
  InvalidArgumentError,
  KindMismatchError,
  LockContendedError,
  LockLostError,
  NoQuorumError,
} from '../../lib/core/base/errors';
import type { Lock } from '../../lib/core/lock/lock';
import { Redlock } from '../../lib/core/redlock';
import type { AcquireOptions } from '../../lib/core/base/types';
import { useMasters } from '../harness/engines';
import { sleep, uniqueResource, waitUntil } from '../harness/util';

const suite = useMasters(5);
const engine = (...args: Parameters<typeof suite.engine>): Redlock => suite.engine(...args);

const keyOf = (rl: Redlock, r: string): string => rl.keyOf(r);
/** Each master's view of a key: its type and content. */
async function stateOf(key: string): Promise<string[]> {
  return Promise.all(
    suite.probe.map(async (c) => {
      const type = await c.type(key);
      if (type === 'string') return `string:${await c.get(key)}`;
      if (type === 'zset')
        return `zset:${(await c.zrange(key, '0', '-1', 'WITHSCORES')).join(',')}`;
      return type;
    }),
  );
}

describe('shared (read) locks', () => {
  it('admits many readers at once; each is a member of the reader set on every master', async () => {
    const rl = engine();
    const r = uniqueResource('readers');
    const readers = await Promise.all(
      Array.from({ length: 8 }, () => rl.acquire(r, { shared: true, ttl: 5000 })),
    );
    expect(readers.every((l) => l.kind === 'shared' && l.limit === undefined)).toBe(true);
    // (Each granted at a quorum: the last masters' writes may still be on their way.)
    await waitUntil(async () =>
      (await Promise.all(suite.probe.map((c) => c.zrange(keyOf(rl, r), '0', '-1')))).every(
        (members) => readers.every((l) => members.includes(l.value)),
      ),
    );
    for (const c of suite.probe) {
      expect(await c.type(keyOf(rl, r))).toBe('zset');
      const members = await c.zrange(keyOf(rl, r), '0', '-1');
      for (const l of readers) expect(members).toContain(l.value);
    }
    await Promise.all(readers.map((l) => l.release()));
    await waitUntil(async () => (await stateOf(keyOf(rl, r))).every((s) => s === 'none'));
  });

  it('excludes the writer while readers hold, and readers while the writer holds', async () => {
    const rl = engine();
    const r = uniqueResource('rw');
    const reader = await rl.acquire(r, { shared: true });
    expect(await rl.tryAcquire(r)).toBeNull();
    await reader.release();
    const writer = await rl.acquire(r);
    expect(writer.kind).toBe('mutex');
    expect(await rl.tryAcquire(r, { shared: true })).toBeNull();
    await expect(rl.acquire(r, { shared: true, retryCount: 0 })).rejects.toBeInstanceOf(
      LockContendedError,
    );
    await writer.release();
    const again = await rl.acquire(r, { shared: true });
    await again.release();
  });

  it('does not starve a writer behind a steady stream of readers', async () => {
    const rl = engine({ retryDelay: 30, retryJitter: 10 });
    const r = uniqueResource('starve');
    let stop = false;
    let readsAfterWriter = 0;
    let writerHeld = false;
    const readerLoop = async (offset: number): Promise<void> => {
      await sleep(offset);
      while (!stop) {
        const l = await rl.tryAcquire(r, { shared: true, ttl: 2000 });
        if (l) {
          if (writerHeld) readsAfterWriter++;
          await sleep(60);
          await l.release();
        } else {
          await sleep(5);
        }
      }
    };
    // Overlapping readers: the reader set is never empty while they run.
    const loops = [0, 10, 20, 30, 40, 50].map(readerLoop);
    await sleep(150);
    const start = Date.now();
    // Without the writer-waiting flag this times out: some reader always holds the resource.
    const writer = await rl.acquire(r, { ttl: 2000, retryCount: 10_000, waitTimeout: 3000 });
    writerHeld = true;
    expect(Date.now() - start).toBeLessThan(3000);
    await writer.release();
    // Readers are not shut out for good either: the flag expires by itself.
    await waitUntil(async () => readsAfterWriter > 0, 5000);
    stop = true;
    await Promise.all(loops);
  });

  it('extends and releases only its own membership', async () => {
    const rl = engine();
    const r = uniqueResource('extend');
    const a = await rl.acquire(r, { shared: true, ttl: 1000 });
    const b = await rl.acquire(r, { shared: true, ttl: 1000 });
    const extended = await a.extend(10_000);
    expect(extended.extensions).toBe(1);
    expect(a.remainingValidity).toBeGreaterThan(5000);
    const release = await b.release();
    expect(release.deleted).toBeGreaterThanOrEqual(3); // resolves with a quorum
    await waitUntil(async () =>
      (await Promise.all(suite.probe.map((c) => c.zscore(keyOf(rl, r), b.value)))).every((s) => !s),
    );
    for (const c of suite.probe) {
      expect(await c.zrange(keyOf(rl, r), '0', '-1')).toEqual(expect.arrayContaining([a.value]));
      expect(await c.zscore(keyOf(rl, r), b.value)).toBeNull();
    }
    // b's membership is gone: extending it finds the lock lost, never re-creates it
    await expect(rl.extend(b)).rejects.toBeInstanceOf(LockLostError);
    await a.release();
    // (Released at a majority: the last master's removal may still be on its way; a's
    // membership would live 10 s.)
    await waitUntil(async () => (await stateOf(keyOf(rl, r))).every((s) => s === 'none'));
  });

  it('wakes a waiting writer when the last reader releases (hand-off), not after its retry delay', async () => {
    const rl = engine();
    const waiterEngine = engine({ retryDelay: 20_000, retryJitter: 0 });
    const r = uniqueResource('handoff');
    const reader = await rl.acquire(r, { shared: true, ttl: 30_000 });
    const waiting = waiterEngine.acquire(r, { retryCount: 5, ttl: 5000 });
    await sleep(200); // the writer's first attempt was refused; it sleeps up to 20 s
    const released = Date.now();
    await reader.release();
    const writer = await waiting;
    expect(Date.now() - released).toBeLessThan(3000);
    await writer.release();
  });
});

describe('counting semaphores', () => {
  it('admits `limit` holders, refuses the next, and lets it in when one leaves', async () => {
    const rl = engine();
    const r = uniqueResource('sem');
    const holders = await Promise.all(
      [1, 2, 3].map(() => rl.acquire(r, { limit: 3, ttl: 10_000 })),
    );
    expect(holders.every((l) => l.kind === 'semaphore' && l.limit === 3)).toBe(true);
    const tokens = holders.map((l) => l.fencingToken as number).sort((x, y) => x - y);
    expect(new Set(tokens).size).toBe(3);
    expect(await rl.tryAcquire(r, { limit: 3 })).toBeNull();
    const err = await rl.acquire(r, { limit: 3, retryCount: 0 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LockContendedError);
    expect((err as LockContendedError).retryAfter).toBeGreaterThan(5000);
    await holders[1].release();
    const fourth = await rl.acquire(r, { limit: 3 });
    expect(fourth.fencingToken).toBeGreaterThan(tokens[2]);
    await Promise.all([holders[0], holders[2], fourth].map((l) => l.release()));
  });

  it('never has more than `limit` holders among many contenders', async () => {
    const rl = engine();
    const r = uniqueResource('sem-many');
    let inside = 0;
    let most = 0;
    await Promise.all(
      Array.from({ length: 12 }, async () => {
        for (let i = 0; i < 3; i++) {
          const l = await rl.acquire(r, {
            limit: 2,
            ttl: 5000,
            retryCount: 10_000,
            waitTimeout: 20_000,
          });
          inside++;
          most = Math.max(most, inside);
          await sleep(5);
          inside--;
          await l.release();
        }
      }),
    );
    expect(most).toBe(2);
  });

  it('hand-off: a waiter is woken by a holder leaving', async () => {
    const rl = engine();
    const waiterEngine = engine({ retryDelay: 20_000, retryJitter: 0 });
    const r = uniqueResource('sem-handoff');
    const a = await rl.acquire(r, { limit: 1, ttl: 30_000 });
    const waiting = waiterEngine.acquire(r, { limit: 1, retryCount: 5 });
    await sleep(200);
    const released = Date.now();
    await a.release();
    const b = await waiting;
    expect(Date.now() - released).toBeLessThan(3000);
    await b.release();
  });

  it('needs floor(N·n/(n+1)) + 1 masters: with 5 masters and limit 2, four', async () => {
    const rl = engine();
    const r = uniqueResource('sem-quorum');
    // Fill master 4 with foreign holders of the same semaphore: only 4 masters can admit us.
    await suite.probe[4].zadd(
      rl.keyOf(r),
      '+inf',
      '#semaphore:2',
      String(Date.now() + 60_000),
      'x1',
    );
    await suite.probe[4].zadd(rl.keyOf(r), String(Date.now() + 60_000), 'x2');
    await suite.probe[4].pexpire(rl.keyOf(r), 60_000);
    const l = await rl.acquire(r, { limit: 2 });
    expect(l.votes.filter((v) => v.outcome === 'ok')).toHaveLength(4);
    await l.release();
    // One more full master: 3 of 5 is a majority, but not enough for a semaphore of 2.
    await suite.probe[3].zadd(
      rl.keyOf(r),
      '+inf',
      '#semaphore:2',
      String(Date.now() + 60_000),
      'x1',
    );
    await suite.probe[3].zadd(rl.keyOf(r), String(Date.now() + 60_000), 'x2');
    await suite.probe[3].pexpire(rl.keyOf(r), 60_000);
    const err = await rl.acquire(r, { limit: 2, retryCount: 0 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LockContendedError);
    for (const c of suite.probe.slice(0, 3)) expect(await c.exists(rl.keyOf(r))).toBe(0);
    await Promise.all(suite.probe.map((c) => c.del(rl.keyOf(r))));
  });
});

describe('kind mismatch: a typed error, at once, nothing written', () => {
  type Setup = { label: string; hold: AcquireOptions | 'foreign' };
  const holds: Setup[] = [
    { label: 'plain', hold: {} },
    { label: 'shared', hold: { shared: true } },
    { label: 'semaphore 2', hold: { limit: 2 } },
    { label: 'foreign hash', hold: 'foreign' },
  ];
  const asks: { label: string; ask: AcquireOptions }[] = [
    { label: 'plain', ask: {} },
    { label: 'shared', ask: { shared: true } },
    { label: 'semaphore 2', ask: { limit: 2 } },
    { label: 'semaphore 3', ask: { limit: 3 } },
  ];
  const compatible = (h: string, a: string): boolean =>
    h === a || (h === 'plain' && a === 'shared') || (h === 'shared' && a === 'plain');

  for (const { label: held, hold } of holds) {
    for (const { label: asked, ask } of asks) {
      if (compatible(held, asked)) continue;
      it(`held as ${held}, asked as ${asked}`, async () => {
        const rl = engine();
        const r = uniqueResource('mismatch');
        const key = rl.keyOf(r);
        let holder: Lock | undefined;
        if (hold === 'foreign') await Promise.all(suite.probe.map((c) => c.hset(key, 'f', '1')));
        else holder = await rl.acquire(r, { ...hold, ttl: 30_000 });
        // The acquire returns at a quorum: the last master's write may still be on its way.
        await waitUntil(async () => (await stateOf(key)).every((t) => t !== 'none'), 2000);
        const before = await stateOf(key);
        const started = Date.now();
        const err = await rl
          .acquire(r, { ...ask, retryCount: 50, retryDelay: 1000, retryJitter: 0 })
          .catch((e: unknown) => e);
        expect(err).toBeInstanceOf(KindMismatchError);
        const e = err as KindMismatchError;
        expect(e.code).toBe('KIND_MISMATCH');
        expect(e.attempts).toBe(1);
        expect(Date.now() - started).toBeLessThan(1000); // never retried
        expect(e.found.kind).toBe(
          hold === 'foreign' ? 'foreign' : held === 'plain' ? 'mutex' : held.split(' ')[0],
        );
        expect(e.requested.name).toBe(ask.shared ? 'shared' : ask.limit ? 'semaphore' : 'mutex');
        // tryAcquire: the same error, not `null`
        await expect(rl.tryAcquire(r, ask)).rejects.toBeInstanceOf(KindMismatchError);
        expect(await stateOf(key)).toEqual(before);
        await holder?.release();
        await Promise.all(suite.probe.map((c) => c.del(key)));
      });
    }
  }

  it('a plain lock releasing or extending on a reader set answers "not ours", never an error', async () => {
    const rl = engine();
    const r = uniqueResource('wrongtype');
    const plain = await rl.acquire(r, { ttl: 300 });
    // gone on every master, not only master 0: a master that set it later still held it (its
    // release vote was then 'ok', and the reader had no membership there)
    await waitUntil(
      async () =>
        (await Promise.all(suite.probe.map((c) => c.exists(rl.keyOf(r))))).every((e) => e === 0),
      3000,
    );
    const reader = await rl.acquire(r, { shared: true, ttl: 10_000 });
    // the plain lock's keys expired and readers hold the resource: its extend finds it lost
    await expect(plain.extend(1000)).rejects.toBeInstanceOf(LockLostError);
    const released = await rl.release(plain);
    expect(released.deleted).toBe(0);
    expect(released.votes.some((v) => v.outcome === 'error' || v.outcome === 'ok')).toBe(false);
    expect(released.votes.filter((v) => v.outcome === 'held').length).toBeGreaterThanOrEqual(3);
    await reader.release();
  });
});

describe('options', () => {
  it('refuses shared with limit, a bad limit, a non-boolean shared — before any Redis call', async () => {
    const rl = engine();
    const r = uniqueResource('opts');
    for (const bad of [
      { shared: true, limit: 2 },
      { limit: 0 },
      { limit: 1.5 },
      { limit: '2' },
      { shared: 'yes' },
    ] as unknown as AcquireOptions[]) {
      await expect(rl.acquire(r, bad)).rejects.toBeInstanceOf(InvalidArgumentError);
      await expect(rl.using(r, () => 1, bad)).rejects.toBeInstanceOf(InvalidArgumentError);
    }
    expect(await suite.probe[0].exists(rl.keyOf(r))).toBe(0);
  });

  it('using() holds a shared lock or a semaphore slot and keeps it alive', async () => {
    const rl = engine();
    const r = uniqueResource('using');
    const kinds = await Promise.all([
      // waits for the first extension rather than sleeping 400 ms past it: with ttl 300 the
      // extension had 100 ms to land, and a late one lost the lock on a loaded machine
      rl.using(
        r,
        async (_s, l) => (await waitUntil(() => l.extensions > 0), [l.kind, l.extensions > 0]),
        { shared: true, ttl: 900 },
      ),
      rl.using(r, async (_s, l) => l.kind, { shared: true, ttl: 300 }),
    ]);
    expect(kinds).toEqual([['shared', true], 'shared']);
    const limit = await rl.using(uniqueResource('using-sem'), (_s, l) => l.limit, { limit: 4 });
    expect(limit).toBe(4);
  });

  it('a semaphore needs its own quorum of masters up: NoQuorumError names it', async () => {
    const rl = engine();
    const r = uniqueResource('sem-noq');
    suite.masters.masters[4].pause();
    try {
      const err = await rl
        .acquire(r, { limit: 4, retryCount: 0, ttl: 2000 })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(NoQuorumError);
      expect((err as NoQuorumError).quorum).toBe(5);
    } finally {
      suite.masters.masters[4].resume();
    }
  });
});
