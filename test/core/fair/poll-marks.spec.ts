/**
 * Poll marks (fair/fair-keys.ts `pollKey`, fair/acquire-script.ts FAIR_ACQUIRE_SCRIPT, fair/streak.ts):
 * a plain lock that will retry and is refused by another plain lock raises the resource's poll
 * mark for one retry interval on the masters that refused it; a single attempt raises none;
 * shared readers ignore the mark (it holds no one back); and the holder's process reads it in
 * its next local hand-over. The fairness it buys across processes without release
 * announcements is in fair-queue.spec ("a polling engine is not starved").
 */
import { describe, expect, it } from '@jest/globals';
import { waitKey } from '../../../lib/core/base/keys';
import { pollKey } from '../../../lib/core/fair/fair-keys';
import type { Line } from '../../../lib/core/fair/queue-lines';
import { MAX_ALONE_STREAK, MAX_LOCAL_STREAK, mustYield } from '../../../lib/core/fair/streak';
import { Redlock } from '../../../lib/core/redlock';
import type { FairRedisStore } from '../../../lib/core/fair/fair-redis-store';
import { ENGINE_ID_LENGTH } from '../../../lib/core/base/token';
import {
  FAIR_DEFAULTS,
  observedStore,
  fairStoreWith,
  useMasters,
  withCheckedMasters,
} from '../../harness/engines';
import { uniqueResource, waitUntil } from '../../harness/util';
import type { FairAttemptRequest, FairGrant } from '../../../lib/core/fair/fair-store';

const noop = (): void => undefined;

const PREFIX = 'lock:'; // the default keyPrefix
const suite = useMasters(3, FAIR_DEFAULTS);

/** PTTL of `key` on every master (-2: missing). */
function pttls(key: string): Promise<number[]> {
  return Promise.all(suite.probe.map((c) => c.pttl(key)));
}

describe('poll marks', () => {
  it("a plain lock that will retry raises the mark where another engine's plain lock refused it", async () => {
    const rl = await suite.checkedEngine({ handoff: false, retryDelay: 400, retryJitter: 0 });
    const other = await suite.checkedEngine({ handoff: false, retryDelay: 400, retryJitter: 0 });
    const r = uniqueResource('poll-mark');
    const holder = await rl.acquire(r, { ttl: 5000 });
    expect(await pttls(pollKey(PREFIX, r))).toEqual([-2, -2, -2]);
    const waiting = other.acquire(r, { retryCount: 1 });
    // Refused once, then asleep: its mark lives one retry interval (retryDelay + retryJitter +
    // 2 × requestTimeout = 400 + 0 + 500 ms), never longer.
    await waitUntil(async () => (await pttls(pollKey(PREFIX, r))).every((t) => t > 0), 2000);
    for (const t of await pttls(pollKey(PREFIX, r))) expect(t).toBeLessThanOrEqual(900);
    // It is not the writer-waiting flag: a plain lock held by a plain lock raises none.
    expect(await pttls(waitKey(PREFIX, r))).toEqual([-2, -2, -2]);
    await holder.release();
    await (await waiting).release();
  });

  it('a single attempt (tryAcquire, retryCount: 0) raises none', async () => {
    const rl = suite.engine({ handoff: false });
    const r = uniqueResource('poll-once');
    const holder = await rl.acquire(r, { ttl: 5000 });
    expect(await rl.tryAcquire(r)).toBeNull();
    await expect(rl.acquire(r, { retryCount: 0 })).rejects.toThrow();
    expect(await pttls(pollKey(PREFIX, r))).toEqual([-2, -2, -2]);
    await holder.release();
  });

  it('holds no reader back: a shared lock is granted while the mark is up', async () => {
    const rl = await suite.checkedEngine({ handoff: false, retryDelay: 2000, retryJitter: 0 });
    const r = uniqueResource('poll-reader');
    const holder = await rl.acquire(r, { ttl: 5000 });
    // The poller is another engine (a waiter of the same engine would be handed the lock).
    const other = await suite.checkedEngine({ handoff: false, retryDelay: 2000, retryJitter: 0 });
    const waiting = other.acquire(r, { retryCount: 1 }).catch(() => undefined);
    await waitUntil(async () => (await pttls(pollKey(PREFIX, r))).every((t) => t > 0), 2000);
    await holder.release();
    const reader = await rl.acquire(r, { shared: true, retryCount: 0 });
    expect(reader.kind).toBe('shared');
    expect((await pttls(pollKey(PREFIX, r))).every((t) => t > 0)).toBe(true);
    await reader.release();
    await (await waiting)?.release();
  });

  it('a local hand-over reads it, and the queue then bounds its streak without announcements', async () => {
    const polled: (number | undefined)[] = [];
    const attempts: unknown[] = [];
    const a = new Redlock(
      observedStore(suite.clients, noop, (req, outcome) => {
        attempts.push(outcome);
        const grant = outcome.grant as FairGrant | undefined;
        if ((req as FairAttemptRequest).handoverFrom !== undefined) polled.push(grant?.polled);
      }),
      // Long retry delays: a waiter that was refused sleeps until a local release wakes it.
      { ...FAIR_DEFAULTS, handoff: false, retryDelay: 5000, retryJitter: 0 },
    );
    try {
      // Its masters checked first (withCheckedMasters); the attempts counted from here.
      await withCheckedMasters(a);
      attempts.length = 0;
      const r = uniqueResource('poll-handover');
      const first = await a.acquire(r, { ttl: 5000 });
      const second = a.acquire(r, { ttl: 5000 }); // queued behind `first`: a local hand-over next
      // `second` is refused by `first` (the queue did not track `first`: nobody waited when it
      // was granted), a holder of its own engine: no mark.
      await waitUntil(() => attempts.length >= 2, 2000);
      expect(await pttls(pollKey(PREFIX, r))).toEqual([-2, -2, -2]);
      await first.release(); // handed over: nobody else polls
      const third = a.acquire(r, { ttl: 5000 });
      const handed = await second;
      // Another engine's poller is refused by `handed`: its mark is up on every master.
      const b = await suite.checkedEngine({ handoff: false, retryDelay: 2000, retryJitter: 0 });
      const polling = b.acquire(r, { retryCount: 1, ttl: 5000 }).catch(() => undefined);
      await waitUntil(async () => (await pttls(pollKey(PREFIX, r))).every((t) => t > 0), 2000);
      await handed.release(); // handed over to `third`, which reads the mark
      await (await third).release();
      expect(polled).toHaveLength(2);
      expect(polled[0]).toBe(0);
      expect(polled[1]).toBeGreaterThan(0);
      expect(polled[1]).toBeLessThanOrEqual(2000 + 2 * 250);
      await (await polling)?.release();
    } finally {
      await a.close();
    }
  });

  it("a deferring attempt takes no free key another engine's mark is on, and joins the mark", async () => {
    let store: FairRedisStore | undefined;
    const rl = new Redlock(
      fairStoreWith(suite.clients, (s) => (store = s)),
      { ...FAIR_DEFAULTS, handoff: false },
    );
    try {
      await (await rl.acquire(uniqueResource('defer-warm-up'))).release(); // connections checked
      const s = store as FairRedisStore;
      const r = uniqueResource('defer');
      const req = { resources: [r], ttl: 5000, writerWait: 500 };
      const other = 'o'.repeat(ENGINE_ID_LENGTH); // another engine's id
      await Promise.all(suite.probe.map((c) => c.set(pollKey(PREFIX, r), other, 'PX', 5000)));
      const deferred = await s.attempt({ ...req, defer: true });
      expect(deferred.grant).toBeUndefined();
      expect(deferred.grant ? undefined : deferred.refusal).toBe('contended');
      // Refused as if held (the round ends at a quorum of refusals), with the mark's remaining
      // time; no lock key written; its engine's id appended to the mark (the engine deferred to
      // sees it waiting), the mark's TTL kept.
      const held = (deferred.grant ? [] : deferred.votes).filter((v) => v.outcome === 'held');
      expect(held.length).toBeGreaterThanOrEqual(2);
      for (const v of held) {
        expect(v.holderTtl).toBeGreaterThan(0);
        expect(v.holderTtl).toBeLessThanOrEqual(5000);
      }
      expect(await pttls(s.keyOf(r))).toEqual([-2, -2, -2]);
      await waitUntil(async () => {
        const marks = await Promise.all(suite.probe.map((c) => c.get(pollKey(PREFIX, r))));
        return marks.every((m) => m === `${other}+${s.engineId}`); // (the last may be late)
      }, 2000);
      for (const t of await pttls(pollKey(PREFIX, r))) {
        expect(t).toBeGreaterThan(0); // still expires
        expect(t).toBeLessThanOrEqual(5000);
      }
      // Deferring again leaves a joined mark as it is, and still defers to its first engine.
      const again = await s.attempt({ ...req, defer: true });
      expect(again.grant).toBeUndefined();
      expect(await Promise.all(suite.probe.map((c) => c.get(pollKey(PREFIX, r))))).toEqual(
        Array(3).fill(`${other}+${s.engineId}`),
      );
      // Its own mark, joined by the other engine (which deferred to it, and it took the key
      // since): deferring now is the other engine's turn — refused, and the mark becomes the
      // other engine's plain mark, its TTL kept; no lock key written.
      await Promise.all(
        suite.probe.map((c) => c.set(pollKey(PREFIX, r), `${s.engineId}+${other}`, 'PX', 5000)),
      );
      const turn = await s.attempt({ ...req, defer: true });
      expect(turn.grant).toBeUndefined();
      expect(await pttls(s.keyOf(r))).toEqual([-2, -2, -2]);
      await waitUntil(async () => {
        const marks = await Promise.all(suite.probe.map((c) => c.get(pollKey(PREFIX, r))));
        return marks.every((m) => m === other);
      }, 2000);
      for (const t of await pttls(pollKey(PREFIX, r))) {
        expect(t).toBeGreaterThan(0);
        expect(t).toBeLessThanOrEqual(5000);
      }
      await Promise.all(suite.probe.map((c) => c.set(pollKey(PREFIX, r), other, 'PX', 5000)));
      // The same attempt without `defer` takes the key (the algorithm's plain acquire).
      const plain = await s.attempt(req);
      expect(plain.grant).toBeDefined();
      if (plain.grant) await s.release(plain.grant, true);
      // Its own engine's mark, or none, does not hold it back.
      await Promise.all(suite.probe.map((c) => c.set(pollKey(PREFIX, r), s.engineId, 'PX', 5000)));
      const own = await s.attempt({ ...req, defer: true });
      expect(own.grant).toBeDefined();
      if (own.grant) await s.release(own.grant, true);
      await Promise.all(suite.probe.map((c) => c.del(pollKey(PREFIX, r))));
      const none = await s.attempt({ ...req, defer: true });
      expect(none.grant).toBeDefined();
      if (none.grant) await s.release(none.grant, true);
      // Taking the mark down (an engine done with the resource) removes only its own.
      const marks = (): Promise<(string | null)[]> =>
        Promise.all(suite.probe.map((c) => c.get(pollKey(PREFIX, r))));
      await Promise.all(suite.probe.map((c) => c.set(pollKey(PREFIX, r), other, 'PX', 5000)));
      s.unmarkPolling(r);
      await s.attempt(req).then((o) => o.grant && s.release(o.grant, true)); // after it, in order
      expect(await marks()).toEqual([other, other, other]);
      await Promise.all(suite.probe.map((c) => c.set(pollKey(PREFIX, r), s.engineId, 'PX', 5000)));
      s.unmarkPolling(r);
      await s.attempt(req).then((o) => o.grant && s.release(o.grant, true));
      expect(await marks()).toEqual([null, null, null]);
      // A mark another engine joined (it deferred to this one) goes too, and so does the other
      // engine's mark that this one joined; a mark that names it nowhere stays.
      const joined = `${s.engineId}+${other}`;
      await Promise.all(suite.probe.map((c) => c.set(pollKey(PREFIX, r), joined, 'PX', 5000)));
      s.unmarkPolling(r);
      await s.attempt(req).then((o) => o.grant && s.release(o.grant, true));
      expect(await marks()).toEqual([null, null, null]);
      const theirs = `${other}+${s.engineId}`;
      await Promise.all(suite.probe.map((c) => c.set(pollKey(PREFIX, r), theirs, 'PX', 5000)));
      s.unmarkPolling(r);
      await s.attempt(req).then((o) => o.grant && s.release(o.grant, true));
      expect(await marks()).toEqual([null, null, null]);
      const third = 't'.repeat(ENGINE_ID_LENGTH);
      const others = `${other}+${third}`;
      await Promise.all(suite.probe.map((c) => c.set(pollKey(PREFIX, r), others, 'PX', 5000)));
      s.unmarkPolling(r);
      await s.attempt({ ...req, defer: true }); // (deferring to it: nothing is taken)
      expect(await marks()).toEqual([others, others, others]);
    } finally {
      await rl.close();
    }
  });

  it('an engine takes its mark down when its last waiter for the resource is done', async () => {
    // The mark lives retryDelay + 2 × requestTimeout = 3,500 ms; the retry comes after 1,500.
    const settings = { handoff: false, retryDelay: 1500, retryJitter: 0, requestTimeout: 1000 };
    const rl = await suite.checkedEngine(settings);
    const other = await suite.checkedEngine(settings);
    const r = uniqueResource('unmark');
    const holder = await rl.acquire(r, { ttl: 5000 });
    const waiting = other.acquire(r, { ttl: 5000, retryCount: 1 });
    await waitUntil(async () => (await pttls(pollKey(PREFIX, r))).every((t) => t > 0), 2000);
    await holder.release();
    // Its retry takes the lock; its queue then ends, and the mark goes with it (not awaited:
    // within 1 s here, while the mark had about 2 s left).
    await (await waiting).release();
    await waitUntil(async () => (await pttls(pollKey(PREFIX, r))).every((t) => t === -2), 1000);
  }, 20_000);

  it('the rule without announcements: a mark seen bounds the streak, none keeps it', () => {
    const line = { watch: undefined, streak: MAX_LOCAL_STREAK, polled: 0 } as unknown as Line;
    expect(mustYield(line)).toBe(false);
    expect(mustYield({ ...line, streak: 10 * MAX_ALONE_STREAK })).toBe(false);
    expect(mustYield({ ...line, polled: 100 })).toBe(true);
    expect(mustYield({ ...line, streak: MAX_LOCAL_STREAK - 1, polled: 100 })).toBe(false);
  });
});
