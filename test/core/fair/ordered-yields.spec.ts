/**
 * Ordered yields (fair/acquire-script.ts FAIR_ACQUIRE_SCRIPT and fair/release-script.ts FAIR_RELEASE_SCRIPT, fair/fair-keys.ts
 * `orderKey`, fair/streak.ts `RESERVE_MS`), against real redis-server masters: a plain lock
 * refused by another engine's lock enters its engine in the resource's order, scored by when it
 * began to wait (the first score kept); a yield reserves the free key for the engine that has
 * waited longest (not the yielding one) for RESERVE_MS, during which every other attempt is
 * refused without writing the lock key; the reserved engine takes it and leaves the order; a
 * reservation that nobody used expires; a plain release reserves nothing.
 */
import { describe, expect, it } from '@jest/globals';
import { waitKey } from '../../../lib/core/base/keys';
import { orderKey, parkKey, pollKey } from '../../../lib/core/fair/fair-keys';
import type { FairAttemptRequest, FairGrant } from '../../../lib/core/fair/fair-store';
import { RESERVE_MS } from '../../../lib/core/fair/streak';
import { FAIR_ACQUIRE_SCRIPT } from '../../../lib/core/fair/acquire-script';
import { FAIR_RELEASE_SCRIPT } from '../../../lib/core/fair/release-script';
import { FAIR_DEFAULTS, enginesOver, useMasters } from '../../harness/engines';
import { RedisMasters } from '../../harness/redis-masters';
import type { EngineSet } from '../../harness/engines';
import { uniqueResource, waitUntil } from '../../harness/util';

const PREFIX = 'lock:'; // the default keyPrefix
const suite = useMasters(3, FAIR_DEFAULTS);

/**
 * Three engines' stores over the suite's masters (their connections checked), each with its
 * subscriber connections up, as a waiting engine's are: a yield that installs skips an engine of
 * the order whose alive channel has no subscriber (redis/scripts/release.ts).
 */
async function stores(): Promise<EngineSet> {
  const set = await enginesOver(suite.clients, 3);
  await Promise.all(set.all.map((s) => s.watchReleases(uniqueResource('alive'), () => undefined)));
  return set;
}

/** The order of `r` on every master: members with their scores. */
function orders(r: string): Promise<string[][]> {
  return Promise.all(
    suite.probe.map((c) => c.zrange(orderKey(PREFIX, r), '0', '-1', 'WITHSCORES')),
  );
}

const everyMaster = <T>(value: T): T[] => Array(3).fill(value) as T[];

/**
 * A yield of `token`'s key on every master, reserving for `reserveMs` (FAIR_RELEASE_SCRIPT); with
 * `since`, the yielding engine joins the order with that score (kept at least 61 s).
 */
async function yieldOnMasters(
  key: string,
  token: string,
  r: string,
  reserveMs: number,
  since?: number,
) {
  const keys = [key, orderKey(PREFIX, r)];
  const args = [
    token,
    '3',
    '1',
    String(reserveMs),
    ...(since === undefined ? [] : [String(since), '61000']),
  ];
  await Promise.all(
    suite.probe.map((c) => c.eval(FAIR_RELEASE_SCRIPT.source, 2, ...keys, ...args)),
  );
}

/** A retrying plain attempt of `r` by an engine waiting since `waitSince` (wall ms). */
const retrying =
  (r: string) =>
  (waitSince: number): FairAttemptRequest => ({
    resources: [r],
    ttl: 5000,
    writerWait: 500,
    waitSince,
  });

describe('ordered yields', () => {
  it('a yield reserves the key for the engine that waited longest; others are refused meanwhile', async () => {
    const { all, close } = await stores();
    try {
      const [a, b, c] = all;
      const r = uniqueResource('ordered');
      const req = retrying(r);
      const held = await a.attempt(req(1));
      expect(held.grant).toBeDefined();
      // b waits since 1000, c since 2000; b again (later clock): its first score stays.
      expect((await b.attempt(req(1000))).grant).toBeUndefined();
      expect((await c.attempt(req(2000))).grant).toBeUndefined();
      expect((await b.attempt(req(3000))).grant).toBeUndefined();
      const waiting = [b.engineId, '1000', c.engineId, '2000'];
      await waitUntil(async () => (await orders(r)).every((o) => o.join() === waiting.join()));
      // a yields (the release script as the store sends it, with a 10 s reservation so that a
      // loaded machine cannot outlast it): reserved for b, which leaves the order.
      await yieldOnMasters(a.keyOf(r), (held.grant as FairGrant).token, r, 10_000);
      for (const o of await orders(r)) {
        expect(o).toHaveLength(4);
        expect(o[0]).toMatch(new RegExp(`^\\d+:${b.engineId}$`));
        expect(o[1]).toBe('-1');
        expect(o.slice(2)).toEqual([c.engineId, '2000']);
      }
      // c, and a itself, are refused while the reservation lasts; no lock key is written.
      const refused = await c.attempt(req(2000));
      expect(refused.grant).toBeUndefined();
      for (const v of refused.grant ? [] : refused.votes) {
        if (v.outcome === 'held') expect(v.holderTtl).toBeLessThanOrEqual(10_000);
      }
      expect((await a.attempt(req(4000))).grant).toBeUndefined();
      expect(await Promise.all(suite.probe.map((p) => p.exists(a.keyOf(r))))).toEqual(
        everyMaster(0),
      );
      // b takes it: the reservation is used up, b is out of the order; c (and a) still wait.
      const taken = await b.attempt(req(1000));
      expect(taken.grant).toBeDefined();
      await waitUntil(async () =>
        (await orders(r)).every(
          (o) => o.join() === [c.engineId, '2000', a.engineId, '4000'].join(),
        ),
      );
      // A plain release reserves nothing: whoever comes first takes it.
      await b.release(taken.grant as FairGrant, true);
      const next = await a.attempt(req(4000));
      expect(next.grant).toBeDefined();
      // The store's own yield reserves for RESERVE_MS (for c now: a left the order), and a,
      // whose local waiters wait from now on, joins the order again.
      const yieldedAt = Date.now();
      await a.release(next.grant as FairGrant, true, undefined, undefined, 'yield');
      for (const [i, o] of (await orders(r)).entries()) {
        const [until, who] = o[0].split(':');
        expect(who).toBe(c.engineId);
        expect(o[2]).toBe(a.engineId);
        expect(Number(o[3])).toBeGreaterThanOrEqual(yieldedAt);
        const [sec, usec] = (await suite.probe[i].time()).map(Number);
        expect(Number(until)).toBeLessThanOrEqual(
          sec * 1000 + Math.floor(usec / 1000) + RESERVE_MS,
        );
      }
      // A reservation nobody uses expires: c does not come, b takes the key once it has.
      await waitUntil(async () => {
        const o = await b.attempt(req(5000));
        if (o.grant) await b.release(o.grant, true);
        return o.grant !== undefined;
      }, 2000);
    } finally {
      await close();
    }
  });

  it('a yield names the engine it reserved the key for; the yielding engine joins the order, and leaves it when done', async () => {
    const { all, close } = await stores();
    const sub = suite.probe[0].duplicate({ enableOfflineQueue: true });
    try {
      const [a, b, c] = all;
      const r = uniqueResource('ordered-named');
      const req = retrying(r);
      const held = await a.attempt(req(1));
      expect((await b.attempt(req(1000))).grant).toBeUndefined();
      expect((await c.attempt(req(2000))).grant).toBeUndefined();
      // (Refused at a quorum: the last master may still be running an attempt, which would then
      // come after the yield below — sent on other connections.)
      const waiting = [b.engineId, '1000', c.engineId, '2000'];
      await waitUntil(async () => (await orders(r)).every((o) => o.join() === waiting.join()));
      const messages: string[] = [];
      sub.on('message', (_channel: string, message: string) => messages.push(message));
      await sub.subscribe(a.keyOf(r));
      const token = (held.grant as FairGrant).token;
      await yieldOnMasters(a.keyOf(r), token, r, 10_000, 3000);
      // Every master names b (the engine waiting longest); a waits from 3000 on, after c.
      await waitUntil(() => messages.length > 0);
      expect(messages[0]).toBe(`^${token}:${b.engineId}`);
      for (const o of await orders(r)) {
        expect(o[0]).toMatch(new RegExp(`^\\d+:${b.engineId}$`));
        expect(o.slice(2)).toEqual([c.engineId, '2000', a.engineId, '3000']);
      }
      // An engine whose queue of the resource ended takes itself off the order.
      a.unmarkPolling(r);
      await waitUntil(async () =>
        (await orders(r)).every((o) => o.slice(2).join() === [c.engineId, '2000'].join()),
      );
    } finally {
      sub.disconnect();
      await close();
    }
  });

  it('an order made by a yield expires (nobody else waited there)', async () => {
    const { all, close } = await stores();
    try {
      const a = all[0];
      const r = uniqueResource('ordered-expiry');
      const held = await a.attempt(retrying(r)(1));
      await a.release(held.grant as FairGrant, true, undefined, undefined, 'yield');
      expect(await orders(r)).toEqual(everyMaster([a.engineId, expect.any(String)]));
      for (const p of suite.probe) {
        const ttl = await p.pttl(orderKey(PREFIX, r));
        expect(ttl).toBeGreaterThan(0);
        expect(ttl).toBeLessThanOrEqual(a.settings.maxTtl + 1000);
      }
    } finally {
      await close();
    }
  });

  it('a grant says whether other engines still wait in the order', async () => {
    const { all, close } = await stores();
    try {
      const [a, b, c] = all;
      const r = uniqueResource('ordered-others');
      const req = retrying(r);
      const held = (await a.attempt(req(1))).grant as FairGrant;
      expect(held.othersWait).toBe(false); // nobody in the order
      // b, then c, wait behind a's lock; a lets go without a yield (no reservation).
      expect((await b.attempt(req(1000))).grant).toBeUndefined();
      expect((await c.attempt(req(2000))).grant).toBeUndefined();
      await a.release(held, true);
      // b takes the free key; c still waits there. b keeps its place in the order until its
      // release, a pass, takes it off: a master's vote may not make a grant, and an engine
      // taken off only where it got votes would make the orders differ between masters.
      const bGrant = (await b.attempt(req(1000))).grant as FairGrant;
      expect(bGrant.othersWait).toBe(true);
      expect(await orders(r)).toEqual(everyMaster([b.engineId, '1000', c.engineId, '2000']));
      await b.release(bGrant, true, undefined, undefined, 'pass');
      // The pass took b off and reserved the key for c (c off the order: its reservation).
      for (const [member, score, ...rest] of await orders(r)) {
        expect([member.endsWith(`:${c.engineId}`), score, rest]).toEqual([true, '-1', []]);
      }
      const cGrant = (await c.attempt(req(2000))).grant as FairGrant;
      expect(cGrant.othersWait).toBe(false);
      // (Granted at a quorum: the last master may still be running the attempt, which uses up
      // the reservation there. The flake check caught the read coming first.)
      await waitUntil(async () => (await orders(r)).every((o) => o.length === 0));
      await c.release(cGrant, true);
    } finally {
      await close();
    }
  });

  it('an engine granted while others wait joins the order where it was not yet, until its pass', async () => {
    const { all, close } = await stores();
    try {
      const [a, b, c] = all;
      const r = uniqueResource('ordered-joins');
      const req = retrying(r);
      const held = (await a.attempt(req(1))).grant as FairGrant;
      expect((await b.attempt(req(1000))).grant).toBeUndefined();
      await a.release(held, true);
      // c's first attempt takes the free key while b waits: had some master refused it, c
      // would be in the order there, and only there (its attempt may not make a grant).
      const cGrant = (await c.attempt(req(2000))).grant as FairGrant;
      expect(cGrant.othersWait).toBe(true);
      // (Granted at a quorum: the last master may still be running the attempt.)
      const joined = [b.engineId, '1000', c.engineId, '2000'].join();
      await waitUntil(async () => (await orders(r)).every((o) => o.join() === joined));
      await c.release(cGrant, true, undefined, undefined, 'pass');
      for (const o of await orders(r)) {
        expect(o).toHaveLength(2); // b's reservation: c is off
        expect(o[0].endsWith(`:${b.engineId}`)).toBe(true);
      }
    } finally {
      await close();
    }
  });

  it("an attempt that installs for the head announces the boot marker's real age, never the attempting engine's known-old answer", async () => {
    const { all, close } = await stores();
    const sub = suite.probe[0].duplicate();
    try {
      const [a] = all;
      const r = uniqueResource('install-age');
      const key = a.keyOf(r);
      const marker = `${PREFIX}test-marker:${r}`;
      const head = 'head00000000'; // an engine id (12 characters)
      const p = suite.probe[0];
      await p.set(marker, '123'); // born long ago
      await p.zadd(orderKey(PREFIX, r), 1, head);
      await p.hset(parkKey(PREFIX, r), head, `${head}tokentokentoken 30000 99999999999999`);
      const heard: string[] = [];
      await RedisMasters.ready([sub]);
      await sub.subscribe(key);
      sub.on('message', (_channel: string, message: string) => heard.push(message));
      // The attempting engine knows the marker '123' to be old (FAIR_ACQUIRE_SCRIPT answers -2 for
      // itself): the install for the head carries the marker's real age all the same. No
      // fencing, one resource; keys: lock, wait flag, poll mark, order, park, marker.
      const me = 'me0000000000';
      const keys = [
        key,
        waitKey(PREFIX, r),
        pollKey(PREFIX, r),
        orderKey(PREFIX, r),
        parkKey(PREFIX, r),
        marker,
      ];
      const args = [
        `${me}attempttoken`,
        '30000',
        '0',
        '123',
        '1',
        '1000',
        '500',
        '',
        '0',
        '2000',
        `${me}parked`,
        '250',
        '',
      ];
      const reply = (await p.eval(
        FAIR_ACQUIRE_SCRIPT.source,
        keys.length,
        ...keys,
        ...args,
      )) as unknown[];
      expect(reply[0]).toBe(0); // refused: the head's token holds the key
      expect(reply[1]).toBe(-2); // (its own answer: known old)
      expect(await p.get(key)).toBe(`${head}tokentokentoken`);
      await waitUntil(() => heard.length > 0);
      const [, named, installed, , age] = heard[0].split(':');
      expect([named, installed]).toEqual([head, `${head}tokentokentoken`]);
      expect(Number(age)).toBeGreaterThan(1_000_000);
    } finally {
      sub.disconnect();
      await close();
    }
  });

  it('a single attempt (no retry) takes part in no order', async () => {
    const { all, close } = await stores();
    try {
      const [a, b] = all;
      const r = uniqueResource('ordered-once');
      const held = await a.attempt({ resources: [r], ttl: 5000, writerWait: 500 });
      expect((await b.attempt({ resources: [r], ttl: 5000 })).grant).toBeUndefined();
      expect(await orders(r)).toEqual(everyMaster([]));
      await a.release(held.grant as FairGrant, true);
    } finally {
      await close();
    }
  });
});
