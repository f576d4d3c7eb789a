/**
 * Passes and kept queues (lib/core/fair/fair-queue.ts `announceAs`, `keep`; redis/scripts/release.ts;
 * lib/core/fair/README.md "Passes"), against real redis-server masters: a plain lock
 * released while other engines wait goes to the engine that waited longest (its parked token
 * installed, or the key reserved for it), without the releasing engine joining the order, and
 * is a plain release when nobody waits; the releasing process's next acquire does not barge past
 * the others; a process whose callers take turns keeps its queue while one of them holds, so its
 * next caller queues behind that holder (no attempt), and no engine starves when every process
 * has only one or two callers.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { aliveChannel, orderKey, parkKey } from '../../../lib/core/fair/fair-keys';
import type { Lock } from '../../../lib/core/lock/lock';
import { MAX_INSTALL_STREAK } from '../../../lib/core/fair/streak';
import type {
  FairAnnounced as Announced,
  Reserved,
} from '../../../lib/core/fair/fair-announcements';
import type { FairAttemptRequest, FairGrant } from '../../../lib/core/fair/fair-store';
import { Redlock } from '../../../lib/core/redlock';
import type { FairRedisStore } from '../../../lib/core/fair/fair-redis-store';
import type { RedlockSettings } from '../../../lib/core/base/settings';
import { FAIR_DEFAULTS, enginesOver, fairStoreWith, useMasters } from '../../harness/engines';
import { sleep, uniqueResource, waitUntil } from '../../harness/util';

const PREFIX = 'lock:'; // the default keyPrefix
const suite = useMasters(3, FAIR_DEFAULTS);
const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0)) await f();
});

/** Longer than any wait below: a key that is gone was deleted, it did not expire. */
const TTL = 30_000;
/** Short retries: a waiter that polled on its timer would take the lock out of turn. */
const RETRY: RedlockSettings = { retryDelay: 10, retryJitter: 10, retryCount: 10_000 };

/**
 * `count` engines, each over its own connections (as separate processes would be), with their
 * stores; closed after the test.
 */
async function processes(
  count: number,
  settings: RedlockSettings = {},
): Promise<{ locks: Redlock[]; stores: FairRedisStore[] }> {
  const set = await enginesOver(() => suite.masters.createClients(), count, {}, settings);
  cleanup.push(() => set.close());
  return { locks: set.locks, stores: set.all };
}

/** A retrying plain attempt of `r` (ordered: it parks when the engine hears `r`'s releases). */
const retrying = (r: string, waitSince: number): FairAttemptRequest => ({
  resources: [r],
  ttl: TTL,
  writerWait: 500,
  waitSince,
});

/** Subscribers of `engineId`'s alive channel on each master (fair/fair-keys.ts). */
function alive(engineId: string): Promise<number[]> {
  return Promise.all(
    suite.probe.map(async (p) =>
      Number(((await p.pubsub('NUMSUB', aliveChannel(PREFIX, engineId))) as unknown[])[1]),
    ),
  );
}

/** `rl` acquires `r`, noting `name` in `order` once granted. */
function noted(rl: Redlock, r: string, order: string[], name: string): Promise<Lock> {
  return rl.acquire(r, { ttl: TTL }).then((lock) => {
    order.push(name);
    return lock;
  });
}

/**
 * `rl` (engine `engineId`) asks for `r` held by another engine ({@link noted}); resolves once it
 * is the one engine in the masters' order of `r` and its alive channel has a subscriber on every
 * master, with its pending acquire.
 */
async function waitingBehind(
  rl: Redlock,
  engineId: string,
  r: string,
  order: string[],
  name: string,
): Promise<{ turn: Promise<Lock> }> {
  const turn = noted(rl, r, order, name);
  await waitUntil(async () =>
    (await Promise.all(suite.probe.map((p) => p.zrange(orderKey(PREFIX, r), '0', '-1')))).every(
      (members) => members.length === 1,
    ),
  );
  await waitUntil(async () => (await alive(engineId)).every((n) => n > 0));
  return { turn };
}

/**
 * `holder` takes `r` (a retrying plain attempt), and `waiter` waits behind it: it watches `r`'s
 * releases and its refused attempt entered it in the order and parked its next token. `got`
 * collects the waiter's installs.
 */
async function holdWithWaiter(
  holder: FairRedisStore,
  waiter: FairRedisStore,
  r: string,
): Promise<{ held: FairGrant; got: (FairGrant | undefined)[] }> {
  const got: (FairGrant | undefined)[] = [];
  waiter.onInstalled((_resource, grant) => got.push(grant));
  const held = (await holder.attempt(retrying(r, 1))).grant as FairGrant;
  expect(held).toBeDefined();
  const watch = await waiter.watchReleases(r, () => undefined);
  cleanup.push(() => watch?.stop());
  expect((await waiter.attempt(retrying(r, 1000))).grant).toBeUndefined();
  // (Refused at a quorum: the last master may still be running the attempt, which would then
  // come after what the test sends there next on other connections.)
  await parkedEverywhere(waiter, r);
  return { held, got };
}

/** Waits until `store`'s engine has a token parked for `r` on every master. */
function parkedEverywhere(store: FairRedisStore, r: string): Promise<void> {
  return waitUntil(async () =>
    (await Promise.all(suite.probe.map((p) => p.hget(parkKey(PREFIX, r), store.engineId)))).every(
      (t) => t !== null,
    ),
  );
}

/** What `store`'s engine hears announced for `r` (first announcements only). */
async function heard(
  store: FairRedisStore,
  r: string,
): Promise<{ announced: Announced; reserved: Reserved | undefined }[]> {
  const got: { announced: Announced; reserved: Reserved | undefined }[] = [];
  const watch = await store.watchFairReleases(r, (announced, _token, repeat, reserved) => {
    if (!repeat && announced !== 'subscribed') got.push({ announced, reserved });
  });
  expect(watch?.live).toBe(true);
  cleanup.push(() => watch?.stop());
  return got;
}

describe('passes', () => {
  it('a pass installs the parked token of the engine that waited longest; the releasing engine does not join the order', async () => {
    const { stores } = await processes(3);
    const [a, b, c] = stores;
    const r = uniqueResource('pass');
    const toC = await heard(c, r);
    // b waits: its refused attempt enters it in the order and parks its next token.
    const { held, got } = await holdWithWaiter(a, b, r);

    await a.release(held, true, undefined, undefined, 'pass');
    await waitUntil(() => got.length > 0);
    const grant = got[0] as FairGrant;
    expect(grant.token.startsWith(b.engineId)).toBe(true);
    for (const c2 of suite.probe) {
      expect(await c2.get(a.keyOf(r))).toBe(grant.token);
      // Neither b (taken off) nor a (a pass does not join) is in the order; a parked nothing.
      expect(await c2.zrange(orderKey(PREFIX, r), '0', '-1')).toEqual([]);
      expect(await c2.hget(parkKey(PREFIX, r), a.engineId)).toBeNull();
    }
    // Another engine hears a yield that names someone else: it stands by.
    await waitUntil(() => toC.length > 0);
    expect(toC[0]).toEqual({ announced: 'yield', reserved: 'other' });
    await b.release(grant, true);
  });

  it('a pass gives the lock away on every master where the key is free, never where another holder has it', async () => {
    const { stores } = await processes(3);
    const [a, b] = stores;
    const r = uniqueResource('pass-free');
    const key = a.keyOf(r);
    const { held, got } = await holdWithWaiter(a, b, r);
    // a's key is gone from the first master (expired there, say); another holder has the
    // second one's.
    const [free, taken, kept] = suite.probe;
    await free.del(key);
    await taken.set(key, 'another-holder', 'PX', TTL);

    await a.release(held, true, undefined, undefined, 'pass');
    await waitUntil(() => got.length > 0);
    const grant = got[0] as FairGrant;
    expect(grant.token.startsWith(b.engineId)).toBe(true);
    // b's token where a's was and where the key was free; the other holder's key untouched.
    await waitUntil(async () => (await free.get(key)) === grant.token);
    expect(await kept.get(key)).toBe(grant.token);
    expect(await taken.get(key)).toBe('another-holder');
    // There b is named all the same: off the order and the park, as on the others (a master
    // that kept it would name it alone at the next pass, or install its stale token).
    for (const p of suite.probe) {
      expect(await p.zscore(orderKey(PREFIX, r), b.engineId)).toBeNull();
      expect(await p.hget(parkKey(PREFIX, r), b.engineId)).toBeNull();
    }
    await taken.del(key);
    await b.release(grant, true);
  });

  it('a pass while no other engine waits is announced as a plain release', async () => {
    const { stores } = await processes(2);
    const [a, c] = stores;
    const r = uniqueResource('pass-alone');
    const toC = await heard(c, r);
    const held = (await a.attempt(retrying(r, 1))).grant as FairGrant;
    await a.release(held, true, undefined, undefined, 'pass');
    await waitUntil(() => toC.length > 0);
    expect(toC[0]).toEqual({ announced: 'release', reserved: undefined });
    for (const c2 of suite.probe) {
      expect(await c2.exists(a.keyOf(r))).toBe(0);
      expect(await c2.exists(orderKey(PREFIX, r))).toBe(0); // nobody joined
    }
  });

  it('an engine of the order that is gone (no subscriber on its alive channel) is skipped: its parked token is not installed', async () => {
    const { stores } = await processes(2);
    const [a, b] = stores;
    const r = uniqueResource('pass-gone');
    const got: (FairGrant | undefined)[] = [];
    b.onInstalled((_resource, grant) => got.push(grant));
    const held = (await a.attempt(retrying(r, 1))).grant as FairGrant;
    // A process that waited longest and died: its entry in the order and its parked token are
    // still there, its connections are not (an engine id nobody subscribes: 12 characters).
    const gone = 'gone00000000';
    for (const p of suite.probe) {
      await p.zadd(orderKey(PREFIX, r), 1, gone);
      await p.hset(parkKey(PREFIX, r), gone, `${gone}tokentokentoken ${TTL} 99999999999999`);
    }
    // b waits behind it.
    const bWatch = await b.watchReleases(r, () => undefined);
    cleanup.push(() => bWatch?.stop());
    expect((await b.attempt(retrying(r, 1000))).grant).toBeUndefined();
    await parkedEverywhere(b, r); // (refused at a quorum: see holdWithWaiter)

    await a.release(held, true, undefined, undefined, 'pass');
    await waitUntil(() => got.length > 0);
    expect((got[0] as FairGrant).token.startsWith(b.engineId)).toBe(true);
    for (const p of suite.probe) {
      expect(await p.get(a.keyOf(r))).toBe((got[0] as FairGrant).token);
      expect(await p.zscore(orderKey(PREFIX, r), gone)).toBeNull(); // taken off
      expect(await p.hget(parkKey(PREFIX, r), gone)).toBeNull();
    }
    await b.release(got[0] as FairGrant, true);
  });

  it('an attempt that finds the key free while another engine heads the order installs the parked token of that engine, and is refused by it', async () => {
    const { stores } = await processes(3);
    const [a, b, c] = stores;
    const r = uniqueResource('attempt-installs');
    const key = a.keyOf(r);
    // b waits behind a's lock (in the order, its token parked); a lets go plainly: no pass.
    const { held, got } = await holdWithWaiter(a, b, r);
    await a.release(held, true);
    for (const p of suite.probe) expect(await p.exists(key)).toBe(0);
    // c, which hears r's announcements (it parks), finds the key free: b waited longer.
    const toC = await heard(c, r);
    const cAttempt = await c.attempt(retrying(r, 2000));
    expect(cAttempt.grant).toBeUndefined();
    await waitUntil(() => got.length > 0);
    const grant = got[0] as FairGrant;
    expect(grant.token.startsWith(b.engineId)).toBe(true);
    // (Granted at a quorum of announced installs: the last one may not be heard yet, and c's
    // attempt, refused by a quorum, may still be on its way to the last master.)
    expect(grant.votes.filter((v) => v.outcome === 'ok').length).toBeGreaterThanOrEqual(2);
    await waitUntil(async () =>
      (await Promise.all(suite.probe.map((p) => p.get(key)))).every((v) => v === grant.token),
    );
    for (const p of suite.probe) {
      // c entered the order and parked its next token; b keeps its place until its pass (a
      // master taking it off alone would make its order differ from the others').
      expect(await p.zrange(orderKey(PREFIX, r), '0', '-1', 'WITHSCORES')).toEqual([
        b.engineId,
        '1000',
        c.engineId,
        '2000',
      ]);
      expect(await p.hget(parkKey(PREFIX, r), c.engineId)).not.toBeNull();
    }
    // Announced as a yield that names b: c stands by for it.
    await waitUntil(() => toC.some((h) => h.announced === 'yield'));
    expect(toC.find((h) => h.announced === 'yield')).toEqual({
      announced: 'yield',
      reserved: 'other',
    });
    await b.release(grant, true, undefined, undefined, 'pass');
    for (const p of suite.probe) {
      expect(await p.zscore(orderKey(PREFIX, r), b.engineId)).toBeNull();
    }
  });

  it('an attempt that finds the key free takes it when the head of the order parked nothing there, or is gone', async () => {
    const { stores } = await processes(3);
    const [a, b, c] = stores;
    const r = uniqueResource('attempt-head-gone');
    const key = a.keyOf(r);
    const held = (await a.attempt(retrying(r, 1))).grant as FairGrant;
    // Heads of the order: one that parked nothing, and (older) one that died with its token
    // parked (no subscriber on its alive channel: an engine id nobody subscribes).
    const gone = 'gone00000000';
    for (const p of suite.probe) {
      await p.zadd(orderKey(PREFIX, r), 1, gone, 2, b.engineId);
      await p.hset(parkKey(PREFIX, r), gone, `${gone}tokentokentoken ${TTL} 99999999999999`);
    }
    const bWatch = await b.watchReleases(r, () => undefined);
    cleanup.push(() => bWatch?.stop());
    await waitUntil(async () => (await alive(b.engineId)).every((n) => n > 0));
    await a.release(held, true);
    await heard(c, r);
    const grant = (await c.attempt(retrying(r, 2000))).grant as FairGrant;
    expect(grant).toBeDefined();
    // (Granted at a quorum: the last master may still be running the attempt.)
    await waitUntil(async () =>
      (await Promise.all(suite.probe.map((p) => p.get(key)))).every((v) => v === grant.token),
    );
    for (const p of suite.probe) {
      expect(await p.zscore(orderKey(PREFIX, r), gone)).toBeNull(); // taken off, with its park
      expect(await p.hget(parkKey(PREFIX, r), gone)).toBeNull();
    }
    await c.release(grant, true);
  });

  it('an engine sends the same wait start on every attempt: the one its first refused attempt sent', async () => {
    const { locks, stores } = await processes(2, RETRY);
    const [a, b] = locks;
    const r = uniqueResource('same-wait-start');
    const held = await a.acquire(r, { ttl: TTL });
    const sent: { waitSince: number | undefined; outcome: number | undefined }[] = [];
    const attempt = stores[1].attempt.bind(stores[1]);
    stores[1].attempt = async (req) => {
      const outcome = await attempt(req);
      sent.push({
        waitSince: req.waitSince,
        outcome: outcome.grant ? undefined : outcome.waitSince,
      });
      return outcome;
    };
    // Refused, then again once its watch of r is up.
    const pending = b.acquire(r, { ttl: TTL });
    await waitUntil(() => sent.length >= 2);
    const first = sent[0].outcome as number;
    expect(sent[0].waitSince).toBeUndefined(); // its own send time, reported back
    expect(Number.isInteger(first)).toBe(true);
    expect(sent[1].waitSince).toBe(first);
    // Every master keeps that score: the same place everywhere (the last master may still be
    // running the attempt: refused by a quorum, its round ended).
    await waitUntil(async () =>
      (
        await Promise.all(suite.probe.map((p) => p.zscore(orderKey(PREFIX, r), stores[1].engineId)))
      ).every((v) => v === String(first)),
    );
    await held.release();
    await (await pending).release();
  });

  it('a lock taken at the first attempt while another engine waits in the order is passed on: the releasing process does not take it again', async () => {
    const { locks, stores } = await processes(3, RETRY);
    const [a] = locks;
    const [, h, c] = stores;
    const r = uniqueResource('first-attempt-pass');
    // c waits behind h's lock (in the order, its token parked); h lets go without passing it
    // on, and nobody takes the free key before a does, at its first attempt.
    const { held, got } = await holdWithWaiter(h, c, r);
    await h.release(held, true);
    const first = await a.acquire(r, { ttl: TTL });
    expect(first.attempts).toBe(1);
    // a releases and asks again at once: c, which waited, has the lock.
    await first.release();
    const again = a.acquire(r, { ttl: TTL });
    await waitUntil(() => got.length > 0);
    const grant = got[0] as FairGrant;
    expect(grant.token.startsWith(c.engineId)).toBe(true);
    // (a's release, the pass, resolved at a majority; granted at a quorum of announced installs:
    // the last master's install may still be on its way.)
    await waitUntil(async () =>
      (await Promise.all(suite.probe.map((p) => p.get(h.keyOf(r))))).every(
        (v) => v === grant.token,
      ),
    );
    await c.release(grant, true);
    await (await again).release();
  });

  it('the release of a lock another engine kept waiting goes to the engine that waited longest, not to the releasing process again', async () => {
    const { locks, stores } = await processes(3, RETRY);
    const [a, b, c] = locks;
    const r = uniqueResource('no-barging');
    const order: string[] = [];
    const first = await a.acquire(r, { ttl: TTL });
    // b waits behind a: granted after another engine's lock refused it, its lock is passed.
    const bFirst = b.acquire(r, { ttl: TTL });
    await sleep(50);
    await first.release();
    const bLock = await bFirst;
    // c waits behind b (in the order on the masters, its subscriber connections up).
    const { turn: cTurn } = await waitingBehind(c, stores[2].engineId, r, order, 'c');
    // b releases and asks again at once: its attempt is right behind its release on the same
    // connections, ahead of c's, which waits for the announcement. The pass gave c the lock.
    await bLock.release();
    const bAgain = noted(b, r, order, 'b');
    const cLock = await cTurn;
    await sleep(20);
    expect(order).toEqual(['c']);
    await cLock.release();
    await (await bAgain).release();
    expect(order).toEqual(['c', 'b']);
  });
});

describe('kept queues', () => {
  it('a lock taken at the first attempt soon after one that others waited for is passed on too', async () => {
    const { locks, stores } = await processes(3, RETRY);
    const [a, b, c] = locks;
    const r = uniqueResource('lingering');
    const order: string[] = [];
    const first = await a.acquire(r, { ttl: TTL });
    const bFirst = b.acquire(r, { ttl: TTL });
    await sleep(50);
    await first.release();
    // b's lock was kept waiting by a's: released (nobody waits now), then taken again at once,
    // at the first attempt — from the queue b kept for it.
    await (await bFirst).release();
    const bSecond = await b.acquire(r, { ttl: TTL });
    expect(bSecond.attempts).toBe(1);
    // c waits behind b's second lock; b releases it and asks again at once: c goes first.
    const { turn: cTurn } = await waitingBehind(c, stores[2].engineId, r, order, 'c');
    await bSecond.release();
    const bThird = noted(b, r, order, 'b');
    await (await cTurn).release();
    await (await bThird).release();
    expect(order).toEqual(['c', 'b']);
  });

  it("a caller that asks again while another caller of its process holds queues behind it: no attempt against its own process's lock", async () => {
    const refusals: string[] = [];
    let store: FairRedisStore | undefined;
    const rl = new Redlock(
      fairStoreWith(suite.clients, (s) => {
        store = s;
        const attempt = s.attempt.bind(s);
        s.attempt = async (req) => {
          const outcome = await attempt(req);
          if (!outcome.grant) refusals.push(req.resources[0]);
          return outcome;
        };
      }),
      { ...FAIR_DEFAULTS, ...RETRY },
    );
    cleanup.push(() => rl.close());
    expect(store).toBeDefined();
    const r = uniqueResource('kept');
    const caller = async (): Promise<void> => {
      for (let i = 0; i < 10; i++) {
        const lock = await rl.acquire(r, { ttl: TTL });
        await sleep(20); // longer than a release: the other caller asks while this one holds
        await lock.release();
      }
    };
    await Promise.all([caller(), caller()]);
    // Before the first hand-over the queue may have been made afresh (no watch yet): one or two
    // refusals. Made afresh after every grant, each of the 19 hand-overs' releasing caller would
    // attempt against the other caller's lock.
    expect(refusals.length).toBeLessThanOrEqual(3);
  });

  it("a kept queue goes at its holder's validity end when the lock is left to expire, and at once when the engine closes", async () => {
    const { locks } = await processes(2, RETRY);
    const [a, b] = locks;
    const unmarked: string[] = [];
    const c = new Redlock(
      fairStoreWith(suite.masters.createClients(), (s) => {
        const unmark = s.unmarkPolling.bind(s);
        s.unmarkPolling = (resource) => {
          unmarked.push(resource);
          unmark(resource);
        };
      }),
      { ...FAIR_DEFAULTS, ...RETRY },
    );
    let closed = false;
    cleanup.push(() => (closed ? undefined : c.close()));
    // b waits behind a, then holds for good: its queue is kept (with its watch) while it holds.
    const r1 = uniqueResource('kept-expiry');
    const first = await a.acquire(r1, { ttl: TTL });
    const bTurn = b.acquire(r1, { ttl: 400 });
    await sleep(50);
    await first.release();
    await bTurn; // never released
    expect(b.footprint.handoffChannels).toBe(1);
    await waitUntil(() => b.footprint.handoffChannels === 0, 5000);

    // c waits behind a, holds, and closes: its kept queue is dropped (its order entry and parked
    // tokens taken off the masters), not left to a timer that the close cleared.
    const r2 = uniqueResource('kept-close');
    const again = await a.acquire(r2, { ttl: TTL });
    const cTurn = c.acquire(r2, { ttl: TTL });
    await sleep(50);
    await again.release();
    await cTurn;
    expect(unmarked).toEqual([]);
    closed = true;
    await c.close();
    expect(unmarked).toEqual([r2]);
  });

  it('with one or two callers per process, no process starves: a waiting caller sees at most a few turns of each other process', async () => {
    const { locks } = await processes(3, RETRY);
    const r = uniqueResource('few-callers');
    const ROUNDS = 30;
    const grants: string[] = [];
    /** For each grant: how many grants of other processes came between its call and it. */
    const overtaken: number[] = [];
    const caller = async (rl: Redlock, name: string): Promise<void> => {
      for (let i = 0; i < ROUNDS; i++) {
        const asked = grants.length;
        const lock: Lock = await rl.acquire(r, { ttl: TTL });
        overtaken.push(grants.slice(asked).filter((g) => g !== name).length);
        grants.push(name);
        await sleep(1);
        await lock.release();
      }
    };
    await Promise.all(
      locks.flatMap((rl, i) => {
        const name = 'abc'[i];
        return i === 0 ? [caller(rl, name)] : [caller(rl, name), caller(rl, name)];
      }),
    );
    expect(grants).toHaveLength(ROUNDS * 5);
    // In turn, each of the two other processes holds at most MAX_INSTALL_STREAK + 1 times in a
    // row; twice that leaves room for a turn lost to timing on a loaded machine.
    expect(Math.max(...overtaken)).toBeLessThanOrEqual(2 * 2 * (MAX_INSTALL_STREAK + 1));
  });
});
