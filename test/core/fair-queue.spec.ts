/**
 * The waiting policies (lib/core/waiting/waiting.ts) against 5 real masters — in both modes of
 * the `fairness` setting: FIFO grants, no barging, local hand-off without polling, waiters that
 * sleep through a held lock, cancellation mid-queue, multi-resource requests, failed attempts'
 * clean-up, and 10,000 waiters; with fairness across processes: the local streak, two engines on
 * one resource, yields to pollers.
 */
import type { Redis } from 'ioredis';
import { getEventListeners } from 'node:events';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { LockAbortedError, LockContendedError } from '../../lib/core/base/errors';
import type { Lock } from '../../lib/core/lock/lock';
import { MAX_ALONE_STREAK, MAX_INSTALL_STREAK, MAX_LOCAL_STREAK } from '../../lib/core/fair/streak';
import type { FairAttemptOutcome, FairAttemptRequest } from '../../lib/core/fair/fair-store';
import { Redlock } from '../../lib/core/redlock';
import type { Fairness, RedlockSettings } from '../../lib/core/base/settings';
import { observedStore } from '../harness/engines';
import { contend, longestStreak } from '../harness/two-engines';
import { RedisMasters } from '../harness/redis-masters';
import { sleep, uniqueResource, waitUntil } from '../harness/util';

let masters: RedisMasters;
/** The `fairness` setting of the engines the running block makes. */
let fairness: Fairness = 'local';
let clients: Redis[];
let probe: Redis[];
const engines: Redlock[] = [];

/**
 * An engine whose store shows `onAttempt` each attempt's request before making it, and
 * `onOutcome` the request with its outcome.
 */
function observed(
  settings: RedlockSettings,
  onAttempt: (req: FairAttemptRequest) => void,
  onOutcome?: (req: FairAttemptRequest, outcome: FairAttemptOutcome) => void,
): Redlock {
  const rl = new Redlock(observedStore(clients, onAttempt, onOutcome), {
    quarantine: false,
    requestTimeout: 250,
    fairness,
    ...settings,
  });
  engines.push(rl);
  return rl;
}

/** An engine whose store counts the attempts it makes (per resource list). */
function counted(settings: RedlockSettings = {}): { rl: Redlock; attempts: () => number } {
  let attempts = 0;
  const rl = observed(settings, () => attempts++);
  return { rl, attempts: () => attempts };
}

function engine(settings: RedlockSettings = {}): Redlock {
  const rl = new Redlock(clients, {
    quarantine: false,
    requestTimeout: 250,
    fairness,
    ...settings,
  });
  engines.push(rl);
  return rl;
}

beforeAll(async () => {
  masters = await RedisMasters.start(5);
  clients = masters.createClients();
  probe = masters.createClients();
  await RedisMasters.ready([...clients, ...probe]);
});

// Each test's engines are closed after it: a queue an engine keeps or lets linger is dropped
// later, with a script on every master (fair/unmark-script.ts), which a later test counting the
// scripts it caused would see (flake check). Closing drops them at once, written
// ahead of anything the next test sends on the same connections.
afterEach(async () => {
  await Promise.all(engines.splice(0).map((e) => e.close()));
});

afterAll(async () => {
  await Promise.all(engines.map((e) => e.close()));
  await masters.stop();
});

// The waiting policy's common part (a FIFO per resource, wake-ups): both modes of `fairness`.
describe.each(['local', 'across-processes'] as const)('fairness: %s', (mode) => {
  beforeAll(() => {
    fairness = mode;
  });

  describe('in one process', () => {
    it('grants in arrival order, and a caller that releases and asks again queues behind the others', async () => {
      // Short random retries: a waiter polling on its own timer, or a new acquire attempting at
      // once, would take the lock out of turn.
      const rl = engine({ retryDelay: 10, retryJitter: 10, retryCount: 10_000 });
      const r = uniqueResource('fifo');
      const first = await rl.acquire(r);
      const order: number[] = [];
      const callers = [0, 1, 2, 3].map(async (i) => {
        for (let round = 0; round < 5; round++) {
          const lock = await rl.acquire(r);
          order.push(i);
          await sleep(2);
          await lock.release();
        }
      });
      await sleep(50); // every caller is queued (and the head has met the holder)
      await first.release();
      await Promise.all(callers);
      expect(order).toEqual(Array.from({ length: 5 }, () => [0, 1, 2, 3]).flat());
      expect(rl.footprint.queuedAcquires).toBe(0);
    });

    it('a new acquire does not barge past a waiter', async () => {
      const rl = engine({ retryDelay: 10, retryJitter: 10, retryCount: 10_000 });
      const r = uniqueResource('barge');
      const holder = await rl.acquire(r);
      const order: string[] = [];
      const waiter = rl.acquire(r).then((l) => (order.push('waiter'), l));
      await sleep(30);
      void holder.release();
      const newcomer = rl.acquire(r).then((l) => (order.push('newcomer'), l));
      const w = await waiter;
      await sleep(20);
      expect(order).toEqual(['waiter']);
      await w.release();
      await (await newcomer).release();
      expect(order).toEqual(['waiter', 'newcomer']);
    });

    it('a local release wakes the head at once, without pub/sub and without polling', async () => {
      // No release announcements, a 60 s retry delay and a 10 s holder: only the local hand-off
      // can grant the waiter within the test's time.
      const { rl, attempts } = counted({ handoff: false, retryDelay: 60_000, retryJitter: 0 });
      const r = uniqueResource('local');
      const holder = await rl.acquire(r, { ttl: 10_000 });
      const pending = rl.acquire(r, { ttl: 10_000 });
      await waitUntil(() => attempts() === 2); // the holder's, then the waiter's refused one
      await holder.release();
      const next = await pending;
      expect(next.attempts).toBe(2);
      expect(attempts()).toBe(3);
      await next.release();
    });

    it('the release of a restored lock wakes the local head at once too', async () => {
      // As above, with the holder restored from another engine's serialized lock (restore()).
      const other = engine();
      const { rl, attempts } = counted({ handoff: false, retryDelay: 60_000, retryJitter: 0 });
      const r = uniqueResource('restored');
      const original = await other.acquire(r, { ttl: 10_000 });
      const holder = rl.restore(JSON.parse(JSON.stringify(original)));
      const pending = rl.acquire(r, { ttl: 10_000 });
      pending.catch(() => undefined); // (closed with the engine when the test fails)
      await waitUntil(() => attempts() === 1); // the waiter's refused attempt
      await holder.release();
      // Without the wake-up the waiter sleeps for its 60 s retry delay.
      const next = await Promise.race([pending, sleep(5_000).then(() => undefined)]);
      expect(next?.attempts).toBe(2);
      await next?.release();
    });

    it('waiters make O(1) attempts per hand-off, not one per retry delay', async () => {
      const { rl, attempts } = counted({ retryDelay: 5, retryJitter: 5, retryCount: 100_000 });
      const r = uniqueResource('o1');
      const holder = await rl.acquire(r);
      const n = 20;
      const done = Array.from({ length: n }, async () => {
        const lock = await rl.acquire(r);
        await sleep(20); // each hold spans several retry delays
        await lock.release();
      });
      await sleep(100);
      await holder.release();
      await Promise.all(done);
      // 1 for the holder, and per waiter its grant plus at most: a refused attempt as first head,
      // the retry once its watch was new. Polling every 5–10 ms over ~20 holds of 20 ms would be
      // thousands.
      expect(attempts()).toBeLessThanOrEqual(1 + n + 3);
      expect(rl.footprint).toMatchObject({ queuedAcquires: 0, heldLocks: 0 });
    });

    it('cancelled and exhausted waiters leave the queue without stalling it', async () => {
      const rl = engine({ retryDelay: 10, retryJitter: 0, retryCount: 10_000 });
      const r = uniqueResource('cancel');
      // A holder in another process that never releases: its key expires after 1.5 s.
      await Promise.all(probe.map((c) => c.set(rl.keyOf(r), 'someone', 'PX', 1500)));
      const abort = new AbortController();
      const outcome = (p: Promise<Lock>): Promise<string> =>
        p.then(
          async (l) => {
            await l.release();
            return 'granted';
          },
          (e: unknown) => (e as Error).name,
        );
      const results = [
        // The head of the queue is cancelled: the next one must take its place.
        outcome(rl.acquire(r, { signal: abort.signal })),
        outcome(rl.acquire(r)),
        // A small retry budget: gives up while queued, before its turn comes.
        outcome(rl.acquire(r, { retryCount: 2 })),
        outcome(rl.acquire(r)),
        outcome(rl.acquire(r, { waitTimeout: 150 })),
        outcome(rl.acquire(r)),
      ];
      await sleep(30);
      abort.abort();
      await sleep(1000); // the budgets and the wait timeout end while the holder still holds
      expect(rl.footprint.queuedAcquires).toBe(3);
      expect(await Promise.all(results)).toEqual([
        'LockAbortedError',
        'granted',
        'LockContendedError',
        'granted',
        'WaitTimeoutError',
        'granted',
      ]);
      expect(rl.footprint.queuedAcquires).toBe(0);
    });

    it('a waiter that gives up while queued reports the contention its queue met', async () => {
      const rl = engine({ retryDelay: 10, retryJitter: 0 });
      const r = uniqueResource('queued-error');
      await Promise.all(probe.map((c) => c.set(rl.keyOf(r), 'someone', 'PX', 10_000)));
      const head = rl.acquire(r, { retryCount: 10_000, waitTimeout: 2000 });
      const queued = rl.acquire(r, { retryCount: 3 }).catch((e: unknown) => e);
      const error = (await queued) as LockContendedError;
      expect(error).toBeInstanceOf(LockContendedError);
      expect(error.attempts).toBe(0);
      expect(error.votes.filter((v) => v.outcome === 'held').length).toBeGreaterThanOrEqual(3);
      expect(error.retryAfter).toBeGreaterThan(0);
      await expect(head).rejects.toThrow(/Gave up waiting/);
    });

    it('multi-resource requests never deadlock', async () => {
      const rl = engine({ retryDelay: 10, retryJitter: 10, retryCount: 100_000 });
      const [a, b, c] = ['a', 'b', 'c'].map((x) => uniqueResource(`multi-${x}`));
      const sets = [[a, b], [b, c], [c, a], [a], [c, b, a], [b], [a, c], [c]];
      const held = new Set<string>();
      let overlaps = 0;
      await Promise.all(
        Array.from({ length: 40 }, async (_, i) => {
          const lock = await rl.acquire(sets[i % sets.length]);
          if (lock.resources.some((x) => held.has(x))) overlaps++;
          for (const x of lock.resources) held.add(x);
          await sleep(1);
          for (const x of lock.resources) held.delete(x);
          await lock.release();
        }),
      );
      expect(overlaps).toBe(0);
      expect(rl.footprint.queuedAcquires).toBe(0);
    });
  });

  describe('across processes', () => {
    it('a waiter sleeps through a held lock (no polling) and wakes on its release', async () => {
      const holderEngine = engine();
      const { rl, attempts } = counted({ retryDelay: 10, retryJitter: 5, retryCount: 10_000 });
      const r = uniqueResource('sleep');
      const holder = await holderEngine.acquire(r, { ttl: 10_000 });
      const pending = rl.acquire(r, { ttl: 10_000 });
      await sleep(1000); // polling every 5–15 ms would make ~100 attempts meanwhile
      expect(attempts()).toBeLessThanOrEqual(2); // refused, then the retry once subscribed
      await holder.release();
      const next = await pending;
      expect(attempts()).toBeLessThanOrEqual(3);
      await next.release();
    });

    it('a waiter wakes at the expiry of a holder that never releases', async () => {
      const { rl, attempts } = counted({ retryDelay: 10, retryJitter: 5, retryCount: 10_000 });
      const r = uniqueResource('expiry');
      await Promise.all(probe.map((c) => c.set(rl.keyOf(r), 'crashed', 'PX', 700)));
      const lock = await rl.acquire(r);
      expect(lock.attempts).toBeLessThanOrEqual(3);
      expect(attempts()).toBeLessThanOrEqual(3);
      await lock.release();
    });
  });

  describe('a failed attempt', () => {
    it('is cleaned up only on the masters that may hold its token (not where it was refused)', async () => {
      const rl = engine();
      const r = uniqueResource('cleanup');
      await (await rl.acquire(uniqueResource('warm-up'))).release(); // connection checks done
      // Another holder owns the key on masters 0–2: the attempt is refused there, set on 3–4.
      await Promise.all(probe.slice(0, 3).map((c) => c.set(rl.keyOf(r), 'someone', 'PX', 10_000)));
      await Promise.all(probe.map((c) => c.config('RESETSTAT')));
      expect(await rl.tryAcquire(r)).toBeNull(); // resolves after the clean-up
      const scriptCalls = await Promise.all(
        probe.map(async (c) => {
          const info = await c.info('commandstats');
          const calls = (name: string): number =>
            Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
          return calls('evalsha') + calls('eval');
        }),
      );
      // Refused masters: the attempt only. The others: the attempt and its clean-up.
      expect(scriptCalls).toEqual([1, 1, 1, 2, 2]);
      expect(await Promise.all(probe.map((c) => c.get(rl.keyOf(r))))).toEqual([
        'someone',
        'someone',
        'someone',
        null,
        null,
      ]);
    });
  });

  describe('the clean-up of a failed attempt', () => {
    it('is announced to the waiters of other processes (they would otherwise sleep a whole ttl)', async () => {
      const rl = engine();
      const r = uniqueResource('cleanup-announced');
      await (await rl.acquire(uniqueResource('warm-up'))).release();
      // Another holder owns the key on masters 0–2: the attempt is set, then cleaned up, on 3–4.
      await Promise.all(probe.slice(0, 3).map((c) => c.set(rl.keyOf(r), 'someone', 'PX', 10_000)));
      // A waiter of another process, listening on master 3.
      const subs = masters.createClients();
      const sub = subs[3];
      const heard: string[] = [];
      try {
        await RedisMasters.ready([sub]);
        await sub.subscribe(rl.keyOf(r));
        sub.on('message', (_channel: string, token: string) => heard.push(token));
        expect(await rl.tryAcquire(r)).toBeNull(); // resolves after the clean-up
        await waitUntil(() => heard.length > 0, 2000);
        expect(heard[0]).not.toBe('someone');
        expect(heard[0]).toMatch(/^~[A-Za-z0-9_-]{39}$/); // the failed attempt's own token, marked
      } finally {
        for (const c of subs) c.disconnect();
      }
    });
  });

  describe('10,000 waiters on one resource in one process', () => {
    it('all are served, one attempt at a time, without a timer or listener each, and nothing is left', async () => {
      const warnings: Error[] = [];
      const onWarning = (w: Error): void => void warnings.push(w);
      process.on('warning', onWarning);
      try {
        const { rl, attempts } = counted({ retryCount: 1_000_000 });
        const r = uniqueResource('many');
        const shared = new AbortController(); // one signal for all: one listener, not 10,000
        const n = 10_000;
        const holder = await rl.acquire(r);
        let granted = 0;
        const all = Array.from({ length: n }, async () => {
          const lock = await rl.acquire(r, { signal: shared.signal });
          granted++;
          await lock.release();
        });
        await waitUntil(() => attempts() >= 2); // the head met the holder
        expect(rl.footprint.queuedAcquires).toBe(n);
        const timers = process.getActiveResourcesInfo().filter((t) => t === 'Timeout').length;
        expect(timers).toBeLessThan(50);
        expect(getEventListeners(shared.signal, 'abort').length).toBeLessThanOrEqual(1);
        await holder.release();
        await Promise.all(all);
        expect(granted).toBe(n);
        // One attempt per grant, plus the head's refusal(s) while the first holder held.
        expect(attempts()).toBeLessThanOrEqual(n + 4);
        await waitUntil(() => Object.values(rl.footprint).every((v) => v === 0));
        expect(warnings.map((w) => w.name)).toEqual([]);
      } finally {
        process.off('warning', onWarning);
      }
    }, 120_000);

    it('a queued acquire costs less than 2 KiB of heap (one suspended frame, no closures of its own)', async () => {
      // A full collection before each reading (the flag is set for this file's worker only).
      setFlagsFromString('--expose-gc');
      const gc = runInNewContext('gc') as () => void;
      const rl = engine({ retryCount: 1_000_000 });
      const r = uniqueResource('heap');
      const holder = await rl.acquire(r);
      const stop = new AbortController();
      // The least of three readings: what the waiters keep is in every one of them, while other
      // work of this process (another test file's clean-up, say) may add to one.
      const heap = async (): Promise<number> => {
        let least = Infinity;
        for (let i = 0; i < 3; i++) {
          if (i > 0) await sleep(50);
          gc();
          least = Math.min(least, process.memoryUsage().heapUsed);
        }
        return least;
      };
      // The promises as acquire() returns them (handlers are attached after the readings).
      const join = (count: number): Promise<Lock>[] =>
        Array.from({ length: count }, () => rl.acquire(r, { signal: stop.signal }));
      // A first 2,000 waiters take what is paid once (the head's refused attempt, its watch, code
      // compiled on first use); the reading is the growth from 8,000 more, all asleep.
      const first = join(2000);
      await waitUntil(() => rl.footprint.queuedAcquires === 2000);
      await sleep(100); // the head's refused attempt and its watch are done
      const before = await heap();
      const n = 8000;
      const more = join(n);
      await waitUntil(() => rl.footprint.queuedAcquires === 2000 + n);
      const perWaiter = ((await heap()) - before) / n;
      const waiting = [...first, ...more];
      const settled = Promise.allSettled(waiting);
      stop.abort();
      for (const s of await settled) {
        expect(s.status === 'rejected' && s.reason instanceof LockAbortedError).toBe(true);
      }
      await holder.release();
      // 2.6 KB before: two suspended async frames per acquire (acquire() and its loop), the
      // loop's own closures and a queue slot list with room for 16 more. About 1.8 KB now.
      expect(perWaiter).toBeLessThan(2048);
    }, 60_000);
  });
});

// Fairness across processes (fair/fair-queue.ts, lib/core/fair/README.md).
describe("fairness: 'across-processes' only", () => {
  beforeAll(() => {
    fairness = 'across-processes';
  });

  describe('the local streak', () => {
    /**
     * An engine whose store records, per attempt, whether it was a local hand-over (`handovers`),
     * and the same for each granted attempt (`grants`).
     */
    function recorded(): { rl: Redlock; handovers: boolean[]; grants: boolean[] } {
      const handovers: boolean[] = [];
      const grants: boolean[] = [];
      const rl = observed(
        { retryDelay: 10, retryJitter: 10, retryCount: 10_000 },
        (req) => handovers.push(req.handoverFrom !== undefined),
        (req, outcome) => {
          if (outcome.grant) grants.push(req.handoverFrom !== undefined);
        },
      );
      return { rl, handovers, grants };
    }

    /** The longest run of consecutive grants that were local hand-overs. */
    function longestHandoverRun(grants: readonly boolean[]): number {
      let run = 0;
      let longest = 0;
      for (const handedOver of grants) {
        run = handedOver ? run + 1 : 0;
        longest = Math.max(longest, run);
      }
      return longest;
    }

    /** `callers` callers of `rl`, each taking `r` `rounds` times (held 1 ms). */
    async function churn(rl: Redlock, r: string, callers: number, rounds: number): Promise<void> {
      await Promise.all(
        Array.from({ length: callers }, async () => {
          for (let i = 0; i < rounds; i++) {
            const lock = await rl.acquire(r);
            await sleep(1);
            await lock.release();
          }
        }),
      );
    }

    it('alone on a resource, a process yields once per MAX_ALONE_STREAK hand-offs, not per MAX_LOCAL_STREAK', async () => {
      const { rl, grants } = recorded();
      const r = uniqueResource('alone');
      // 80 locks: with a yield after every MAX_LOCAL_STREAK hand-overs, no run of hand-overs
      // would be longer than that; nobody else watches the resource, so runs go on to
      // MAX_ALONE_STREAK (64), and the yield ends them there. (A release that finds no sleeping
      // waiter — the next caller still asks, or its attempt is in flight on a loaded machine —
      // is a plain release: it ends a run early, and the run counts from 0 again.)
      await churn(rl, r, 4, 20);
      expect(grants).toHaveLength(80);
      expect(grants.filter((h) => !h).length).toBeGreaterThanOrEqual(2); // the first, the yield
      expect(longestHandoverRun(grants)).toBeGreaterThan(MAX_LOCAL_STREAK);
      expect(longestHandoverRun(grants)).toBeLessThanOrEqual(MAX_ALONE_STREAK);
      expect(MAX_ALONE_STREAK).toBeLessThan(80);
    });

    it('while another engine watches the resource, the streak ends after MAX_INSTALL_STREAK hand-offs', async () => {
      const { rl } = recorded();
      const other = engine({ retryDelay: 10, retryJitter: 10, retryCount: 10_000 });
      const r = uniqueResource('watched');
      const grants: string[] = [];
      const stop = rl.observe((e) => {
        if (e.type === 'acquired') grants.push('ours');
      });
      // The other engine's waiter sleeps on the holder subscribed to the release channel until the
      // streak ends and the release is announced.
      const taking = rl.acquire(r);
      const ours = churn(rl, r, 4, 6); // queued behind the first holder, asleep when it releases
      const first = await taking;
      const theirs = other.acquire(r).then((lock) => {
        grants.push('theirs');
        return lock;
      });
      const subscribers = async (): Promise<number[]> =>
        Promise.all(
          probe.map(async (c) => Number(((await c.pubsub('NUMSUB', rl.keyOf(r))) as unknown[])[1])),
        );
      await waitUntil(async () => (await subscribers()).every((n) => n === 2)); // rl and other
      await first.release();
      await (await theirs).release();
      await ours;
      stop();
      // The first lock, then at most MAX_INSTALL_STREAK hand-overs; the next one yielded (the other
      // engine's turn: its token installed, or its attempt). On a loaded machine a plain attempt
      // may come earlier — one made while our queue was empty — and the streak ends there too.
      const theirsAt = grants.indexOf('theirs');
      expect(theirsAt).toBeGreaterThan(0);
      expect(theirsAt).toBeLessThanOrEqual(1 + MAX_INSTALL_STREAK);
    });

    it('a yield is announced as one (^token) while one or two other engines watch', async () => {
      const a = engine({ retryDelay: 10, retryJitter: 10, retryCount: 10_000 });
      const other = engine({ retryDelay: 10, retryJitter: 10, retryCount: 10_000 });
      /** A watcher of `r`'s announcements on every master (one more engine, as the masters count). */
      const listen = async (r: string): Promise<{ messages: string[]; stop: () => void }> => {
        const subs = probe.map((c) => c.duplicate({ enableOfflineQueue: true }));
        const messages: string[] = [];
        for (const sub of subs)
          sub.on('message', (_channel: string, m: string) => messages.push(m));
        await Promise.all(subs.map((sub) => sub.subscribe(a.keyOf(r))));
        return { messages, stop: () => subs.forEach((sub) => sub.disconnect()) };
      };

      // One other watcher (the listener): the streak ends after MAX_INSTALL_STREAK, and the yield
      // is ordered (nobody is in the order here: it names no engine).
      const r1 = uniqueResource('yield-one');
      const one = await listen(r1);
      try {
        await churn(a, r1, 4, 6);
        const yields = one.messages.filter((m) => m.startsWith('^'));
        expect(yields.length).toBeGreaterThan(0);
        expect(yields.filter((m) => m.includes(':'))).toEqual([]);
      } finally {
        one.stop();
      }

      // Two (the listener and another engine's waiters): the yields are marked. Both engines
      // churn, so the other engine keeps waiting (and watching) while ours hands over; which
      // releases end a streak depends on timing, so the test asks for at least one marked yield.
      const r2 = uniqueResource('yield-two');
      const two = await listen(r2);
      try {
        const grants = await contend(a, other, r2, 6);
        expect(grants).toHaveLength(2 * 4 * 6);
        expect(two.messages.filter((m) => m.startsWith('^')).length).toBeGreaterThan(0);
      } finally {
        two.stop();
      }
    });
  });

  describe('across processes, fair', () => {
    it('two engines on one resource: every caller gets its turns, neither engine keeps the lock', async () => {
      const a = engine({ retryDelay: 10, retryJitter: 10, retryCount: 100_000 });
      const b = engine({ retryDelay: 10, retryJitter: 10, retryCount: 100_000 });
      const grants = await contend(a, b, uniqueResource('two'), 8);
      expect(grants).toHaveLength(8 * 8);
      // While both engines still had callers, one engine never kept the lock for long: the local
      // streak is bounded, then the waiters of both compete for each release.
      expect(longestStreak(grants)).toBeLessThanOrEqual(2 * (MAX_LOCAL_STREAK + 1));
      expect(a.footprint.queuedAcquires + b.footprint.queuedAcquires).toBe(0);
    });

    it('without release announcements (handoff: false), a polling engine is not starved', async () => {
      // No pub/sub: the other engine's waiters poll. Its refused attempts leave poll marks; the
      // busy engine's hand-overs see them and let go after MAX_LOCAL_STREAK, holding its own
      // waiters back until the pollers had their turn (fair/streak.ts).
      const settings = { handoff: false, retryDelay: 10, retryJitter: 10, retryCount: 100_000 };
      const a = engine(settings);
      const b = engine(settings);
      const grants = await contend(a, b, uniqueResource('two-polling'), 8);
      expect(grants).toHaveLength(8 * 8);
      expect(longestStreak(grants)).toBeLessThanOrEqual(2 * (MAX_LOCAL_STREAK + 1));
      expect(a.footprint.queuedAcquires + b.footprint.queuedAcquires).toBe(0);
    });
  });

  describe('a yield to pollers (handoff: false)', () => {
    it('waits for their poll, not for their poll mark to expire', async () => {
      // The marks live retryDelay + retryJitter + 2 × requestTimeout = 10,020 ms; the pollers come
      // back within 20 ms. A yielding engine's waiters defer to the mark (no free key taken while
      // it is up: fair/acquire-script.ts) instead of sleeping for what it has left; before, each
      // yield slept up to 10 s and left a mark of its own for twice that (64 grants took minutes).
      const settings = {
        handoff: false,
        retryDelay: 10,
        retryJitter: 10,
        retryCount: 100_000,
        requestTimeout: 5000,
        ttl: 30_000,
      };
      const a = engine(settings);
      const b = engine(settings);
      const started = performance.now();
      const grants = await contend(a, b, uniqueResource('two-polling-long-marks'), 8);
      const elapsed = performance.now() - started;
      expect(grants).toHaveLength(8 * 8);
      expect(longestStreak(grants)).toBeLessThanOrEqual(2 * (MAX_LOCAL_STREAK + 1));
      expect(elapsed).toBeLessThan(10_000); // less than one mark's life (idle machine: ~0.3 s)
      expect(a.footprint.queuedAcquires + b.footprint.queuedAcquires).toBe(0);
    }, 60_000);
  });
});
