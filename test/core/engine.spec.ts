/**
 * The Redlock engine against 5 real redis-server masters (REDLOCK.md: "One master", "N masters",
 * "Extension"). Fault cases live in faults.spec.ts.
 */
import {
  ExtensionLimitError,
  LockContendedError,
  LockLostError,
  NoQuorumError,
  Redlock,
  WaitTimeoutError,
  LockAbortedError,
} from '../../lib';
import { useMasters } from '../harness/engines';
import { sleep, uniqueResource, valuesOn, waitUntil } from '../harness/util';

// The suites' settings (harness/engines.ts): quarantine off on these fresh private masters (see
// quarantine.spec.ts), and a request timeout generous for a loaded 2-core CI machine (the timeout
// behaviour itself is tested in faults.spec.ts).
const suite = useMasters(5);
const engine = (settings?: ConstructorParameters<typeof Redlock>[1]): Redlock =>
  suite.engine(settings);

describe('acquire and release', () => {
  it('sets the same 160-bit random token with a TTL on every master, then deletes it everywhere', async () => {
    const rl = engine();
    const r = uniqueResource('basic');
    const lock = await rl.acquire(r, { ttl: 5000 });
    expect(lock.value).toMatch(/^[A-Za-z0-9_-]{39}$/); // the engine id (9 bytes), 20 random bytes, base64url
    expect(lock.resources).toEqual([r]);
    expect(lock.remainingValidity).toBeGreaterThan(0);
    expect(lock.remainingValidity).toBeLessThanOrEqual(5000 - 52); // ttl − drift at most
    expect(lock.expiresAt).toBeGreaterThan(Date.now());
    expect(lock.votes.filter((v) => v.outcome === 'ok').length).toBeGreaterThanOrEqual(3);
    // the masters that were not needed for the quorum may answer later (a fixed 20 ms sleep was
    // not always enough on a loaded machine)
    await waitUntil(async () =>
      (await valuesOn(suite.probe, rl.keyOf(r))).every((v) => v === lock.value),
    );
    expect(await valuesOn(suite.probe, rl.keyOf(r))).toEqual(Array(5).fill(lock.value));
    const pttl = await suite.probe[0].pttl(rl.keyOf(r));
    expect(pttl).toBeGreaterThan(4000);

    const again = await rl.acquire(r, { ttl: 5000 }).catch((e: unknown) => e);
    expect(again).toBeInstanceOf(LockContendedError);

    const result = await lock.release();
    // release resolves once a majority deleted the key; the others follow on their connections.
    expect(result.deleted).toBeGreaterThanOrEqual(3);
    expect(lock.isValid).toBe(false);
    await waitUntil(async () =>
      (await valuesOn(suite.probe, rl.keyOf(r))).every((v) => v === null),
    );
  });

  it('uses a new token for every acquisition', async () => {
    const rl = engine();
    const r = uniqueResource('tokens');
    const seen = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const lock = await rl.acquire(r);
      seen.add(lock.value);
      await lock.release();
    }
    expect(seen.size).toBe(20);
  });

  it('keeps mutual exclusion for many concurrent contenders doing a non-atomic read-modify-write', async () => {
    // Three engines stand for three processes; each runs 8 contenders. A holder writes only
    // while its lock is still valid (that is the guarantee: exclusion within the validity window).
    const rls = [engine(), engine(), engine()];
    const r = uniqueResource('counter');
    const counterKey = `counter:${r}`;
    let inside = 0;
    let maxInside = 0;
    let writes = 0;
    const rounds = 5;
    const contender = async (rl: Redlock): Promise<void> => {
      for (let i = 0; i < rounds; i++) {
        await rl.using(
          r,
          async (signal, lock) => {
            inside++;
            maxInside = Math.max(maxInside, inside);
            const value = Number((await suite.probe[0].get(counterKey)) ?? '0');
            await sleep(1);
            inside--;
            if (signal.aborted || !lock.isValid) return;
            await suite.probe[0].set(counterKey, String(value + 1));
            writes++;
          },
          { ttl: 2000, retryCount: 1000, retryDelay: 5, retryJitter: 5 },
        );
      }
    };
    await Promise.all(rls.flatMap((rl) => Array.from({ length: 8 }, () => contender(rl))));
    expect(maxInside).toBe(1);
    expect(writes).toBeGreaterThan(0);
    expect(Number(await suite.probe[0].get(counterKey))).toBe(writes);
  });

  it('locks several resources all-or-nothing and releases a partial grab at once', async () => {
    const rl = engine();
    const [a, b, c] = [uniqueResource('a'), uniqueResource('b'), uniqueResource('c')];
    const lockB = await rl.acquire(b);
    const error = await rl.acquire([a, b, c], { retryCount: 0 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockContendedError);
    // Nothing of the failed attempt is left: a and c are free on every master.
    expect(await valuesOn(suite.probe, rl.keyOf(a))).toEqual(Array(5).fill(null));
    expect(await valuesOn(suite.probe, rl.keyOf(c))).toEqual(Array(5).fill(null));
    await lockB.release();
    const all = await rl.acquire([c, a, b, a]);
    expect(all.resources).toEqual([a, b, c].sort());
    await all.release();
  });

  it('reports the holder TTL on contention and retries until waitTimeout', async () => {
    const rl = engine();
    const r = uniqueResource('wait');
    const lock = await rl.acquire(r, { ttl: 3000 });
    const error =
      (await rl.tryAcquire(r)) ?? (await rl.acquire(r, { retryCount: 0 }).catch((e: unknown) => e));
    expect(error).toBeInstanceOf(LockContendedError);
    expect((error as LockContendedError).retryAfter).toBeGreaterThan(2000);
    expect((error as LockContendedError).votes.some((v) => v.outcome === 'held')).toBe(true);

    const timedOut = await rl
      .acquire(r, { waitTimeout: 150, retryCount: 1000 })
      .catch((e: unknown) => e);
    expect(timedOut).toBeInstanceOf(WaitTimeoutError);
    expect((timedOut as WaitTimeoutError).attempts).toBeGreaterThan(1);
    await lock.release();
  });

  it('cancels a pending acquire through its AbortSignal', async () => {
    const rl = engine();
    const r = uniqueResource('abort');
    const lock = await rl.acquire(r);
    const controller = new AbortController();
    const pending = rl.acquire(r, { retryCount: 1000, retryDelay: 50, signal: controller.signal });
    setTimeout(() => controller.abort(new Error('user gave up')), 60);
    const error = await pending.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockAbortedError);
    expect((error as Error).cause).toEqual(new Error('user gave up'));
    await lock.release();
  });

  it('refuses a lock whose validity is used up (ttl − elapsed − drift ≤ 0) and cleans it up everywhere', async () => {
    // Four masters stop answering (CLIENT PAUSE ALL) for longer than the validity budget
    // ttl − drift = 400 − 122 = 278 ms. Waiting for them is capped at that budget: their late
    // answers can only produce a lock with validity ≤ 0, so the attempt is refused — and their
    // SETs, which run when the pause ends, are removed by the release sent to every master.
    // (A Lua busy loop started 30 ms before the acquire, as before, was not always running yet
    // when the acquire reached its master on a loaded machine: the lock was granted. The pause
    // is in effect once its reply is in.)
    const rl = engine({ ttl: 400, maxTtl: 400, requestTimeout: 390, driftFactor: 0.3 });
    const r = uniqueResource('validity');
    await Promise.all(suite.probe.slice(0, 4).map((c) => c.call('CLIENT', 'PAUSE', '700', 'ALL')));
    const started = Date.now();
    const error = await rl.acquire(r, { retryCount: 0 }).catch((e: unknown) => e);
    const waited = Date.now() - started;
    // Answered when the pause ends, after what the engine sent before it.
    await Promise.all(suite.probe.slice(0, 4).map((c) => c.ping()));
    expect(error).toBeInstanceOf(NoQuorumError);
    expect(['unavailable', 'validity-exhausted']).toContain((error as NoQuorumError).reason);
    // Bounded by the validity budget (plus the cleanup), not by the masters' 700 ms pause:
    // the release waits at most one request timeout more.
    expect(waited).toBeLessThan(278 + 390 + 200);
    // The clean-up waits one request timeout at most: the paused masters may run their SET and
    // its clean-up after the error. Polled for less than the keys' 400 ms ttl, so that a missing
    // clean-up still shows.
    await waitUntil(
      async () => (await valuesOn(suite.probe, rl.keyOf(r))).every((v) => v === null),
      300,
    );
  });

  it('never lets a foreign token delete a lock', async () => {
    const rl = engine();
    const r = uniqueResource('foreign');
    const old = await rl.acquire(r, { ttl: 100 });
    // old expires on every master: waited for, not slept — a master that set its key late (not
    // needed for the quorum) still held it 150 ms after the acquire on a loaded machine
    await waitUntil(async () =>
      (await valuesOn(suite.probe, rl.keyOf(r))).every((v) => v === null),
    );
    const current = await rl.acquire(r, { ttl: 5000 });
    const result = await old.release();
    expect(result.deleted).toBe(0);
    expect(result.votes.some((v) => v.outcome === 'ok')).toBe(false);
    // current's SETs on masters outside its quorum may land later; old's release never deletes them
    await waitUntil(async () =>
      (await valuesOn(suite.probe, rl.keyOf(r))).every((v) => v === current.value),
    );
    expect(await valuesOn(suite.probe, rl.keyOf(r))).toEqual(Array(5).fill(current.value));
    await current.release();
  });
});

describe('extend', () => {
  it('extends on a quorum with compare-and-pexpire', async () => {
    const rl = engine();
    const r = uniqueResource('extend');
    // 1 s, not 300 ms: a stall of 150 ms more before the extend let the lock expire first
    const lock = await rl.acquire(r, { ttl: 1000 });
    await sleep(150);
    await lock.extend(2000);
    expect(lock.remainingValidity).toBeGreaterThan(1500);
    expect(lock.extensions).toBe(1);
    // Extended on (at least) a quorum; a slow master's answer may still be on its way.
    const ttls = await Promise.all(suite.probe.map((c) => c.pttl(rl.keyOf(r))));
    expect(ttls.filter((t) => t > 1500).length).toBeGreaterThanOrEqual(rl.quorum);
    await lock.release();
  });

  it('fails after expiry and never re-creates the key', async () => {
    const rl = engine();
    const r = uniqueResource('expired');
    const lock = await rl.acquire(r, { ttl: 100 });
    // expired on every master (a master outside the quorum may have set its key late)
    await waitUntil(async () =>
      (await valuesOn(suite.probe, rl.keyOf(r))).every((v) => v === null),
    );
    await expect(lock.extend(5000)).rejects.toBeInstanceOf(LockLostError);
    expect(await valuesOn(suite.probe, rl.keyOf(r))).toEqual(Array(5).fill(null));
  });

  it('fails when the keys were taken over, even with validity left on our clock', async () => {
    const rl = engine();
    const r = uniqueResource('stolen');
    const lock = await rl.acquire(r, { ttl: 5000 });
    const signal = lock.signal;
    // (Granted at a quorum: a master outside it may set its key later — after the deletes
    // below, leaving the lock on a majority. CI caught that once.)
    await waitUntil(async () =>
      (await valuesOn(suite.probe, rl.keyOf(r))).every((v) => v === lock.value),
    );
    // Someone deletes our keys on a majority (e.g. FLUSHALL by an operator): the lock is gone.
    await Promise.all(suite.probe.slice(0, 3).map((c) => c.del(rl.keyOf(r))));
    await expect(lock.extend(5000)).rejects.toBeInstanceOf(LockLostError);
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBeInstanceOf(LockLostError);
    expect(await valuesOn(suite.probe.slice(0, 3), rl.keyOf(r))).toEqual([null, null, null]);
    await lock.release();
  });

  it('hands out an aborted signal when it is first read after the loss was found', async () => {
    const rl = engine();
    const r = uniqueResource('lost-then-read');
    const lock = await rl.acquire(r, { ttl: 5000 });
    await Promise.all(suite.probe.map((c) => c.del(rl.keyOf(r))));
    await expect(lock.extend()).rejects.toBeInstanceOf(LockLostError);
    expect(lock.signal.aborted).toBe(true);
    expect(lock.signal.reason).toBeInstanceOf(LockLostError);
    await lock.release();
  });

  it('is bounded by maxExtensions', async () => {
    const rl = engine({ maxExtensions: 2 });
    const lock = await rl.acquire(uniqueResource('bounded'), { ttl: 1000 });
    await lock.extend();
    await lock.extend();
    await expect(lock.extend()).rejects.toBeInstanceOf(ExtensionLimitError);
    await lock.release();
    await expect(lock.extend()).rejects.toBeInstanceOf(LockLostError);
  });
});

describe('using', () => {
  it('keeps a routine that runs 3× longer than the ttl locked, then releases', async () => {
    const rl = engine();
    const other = engine();
    const r = uniqueResource('using');
    let stolen = 0;
    const result = await rl.using(
      r,
      async (signal, lock) => {
        const until = Date.now() + 1200;
        while (Date.now() < until) {
          if (await other.tryAcquire(r, { ttl: 300 })) stolen++;
          await sleep(50);
        }
        return { aborted: signal.aborted, extensions: lock.extensions };
      },
      // ttl 400 and the largest threshold (half): each extension has 200 ms to land before the
      // lock expires (with ttl 300 and the default third, 100 ms of timer lateness lost it)
      { ttl: 400, extendThreshold: 200 },
    );
    expect(stolen).toBe(0);
    expect(result.aborted).toBe(false);
    expect(result.extensions).toBeGreaterThanOrEqual(2);
    // Released at a majority (using() resolves then, and the key would live ~200 ms more); the
    // last masters' deletes may still be on their way.
    const left = await valuesOn(suite.probe, rl.keyOf(r));
    expect(left.filter((v) => v === null).length).toBeGreaterThanOrEqual(rl.quorum);
    await waitUntil(async () =>
      (await valuesOn(suite.probe, rl.keyOf(r))).every((v) => v === null),
    );
    expect(rl.heldLocks).toHaveLength(0);
  });

  it('returns the routine error, not a release error, and releases anyway', async () => {
    const rl = engine();
    const r = uniqueResource('throws');
    await expect(
      rl.using(r, async () => {
        throw new Error('routine failed');
      }),
    ).rejects.toThrow('routine failed');
    // Released at a majority; the last masters' deletes may still be on their way (the key
    // would live the default 10 s ttl).
    await waitUntil(async () =>
      (await valuesOn(suite.probe, rl.keyOf(r))).every((v) => v === null),
    );
  });

  it('aborts the signal at the local validity deadline when auto-extension is off', async () => {
    const rl = engine();
    const r = uniqueResource('deadline');
    const seen = await rl.using(
      r,
      async (signal, lock) => {
        const validUntil = Date.now() + lock.remainingValidity;
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
        return { lateBy: Date.now() - validUntil, reason: signal.reason as unknown };
      },
      { ttl: 200, autoExtend: false },
    );
    expect(seen.reason).toBeInstanceOf(LockLostError);
    expect(seen.lateBy).toBeGreaterThanOrEqual(-1);
  });

  it('reports the end of validity even when the event loop was blocked past it', async () => {
    const rl = engine();
    const lock = await rl.acquire(uniqueResource('blocked'), { ttl: 100 });
    const signal = lock.signal;
    const until = Date.now() + 150;
    while (Date.now() < until) {
      // busy: no timer can run
    }
    expect(lock.remainingValidity).toBe(0);
    expect(lock.signal.aborted).toBe(true);
    expect(signal.aborted).toBe(true);
    await lock.release();
  });
});

describe('observe', () => {
  it('reports acquired, failed, extended, released and lost with timings and votes', async () => {
    const rl = engine();
    const events: string[] = [];
    const seen: import('../../lib').RedlockEvent[] = [];
    const stop = rl.observe((e) => {
      events.push(e.type);
      seen.push(e);
    });
    const r = uniqueResource('observed');
    const lock = await rl.acquire(r, { ttl: 2000 });
    expect(await rl.tryAcquire(r)).toBeNull();
    await lock.extend(100);
    await sleep(150); // the extension's 100 ms validity ends before the release
    await lock.release();
    stop();
    await (await rl.acquire(r)).release();
    expect(events).toEqual(['acquired', 'failed', 'extended', 'lost', 'released']);
    const failed = seen[1] as import('../../lib').FailedEvent;
    expect(failed.error).toBeInstanceOf(LockContendedError);
    expect(failed.votes.some((v) => v.outcome === 'held')).toBe(true);
    const released = seen[4] as import('../../lib').ReleasedEvent;
    expect(released.holdTime).toBeGreaterThanOrEqual(100);
  });

  it('keeps working when an observer throws', async () => {
    const warnings: string[] = [];
    const rl = engine({ logger: { warn: (m) => warnings.push(m) } });
    rl.observe(() => {
      throw new Error('observer bug');
    });
    const lock = await rl.acquire(uniqueResource('throwing-observer'));
    await lock.release();
    expect(warnings.some((w) => w.includes('observer bug'))).toBe(true);
  });
});
