/**
 * Hand-over across processes (lib/core/fair/installs.ts, fair/acquire-script.ts; design:
 * lib/core/fair/README.md), against real redis-server masters: a waiting engine that
 * hears the resource's announcements parks its next token in its refused attempt; a yield that
 * names it sets that token on each master, with a fencing increment, and announces it; the engine
 * is granted on a quorum of those announcements, its validity counted from the token's first
 * send. A token parked too long ago is not installed (the yield reserves as before); an install
 * too few masters announced is deleted everywhere; an install of a token the engine no longer
 * parks is deleted where it was set; an engine whose queue ended deletes its installed token.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { monotonicNow } from '../../../lib/core/base/clock';
import { orderKey, parkKey } from '../../../lib/core/fair/fair-keys';
import { fenceKey, markerKey } from '../../../lib/core/base/keys';
import type { ReleaseWatch } from '../../../lib/core/store';
import type { FairAttemptRequest, FairGrant } from '../../../lib/core/fair/fair-store';
import { Redlock } from '../../../lib/core/redlock';
import { PARK_LIFE_MS } from '../../../lib/core/fair/installs';
import type { FairRedisStore } from '../../../lib/core/fair/fair-redis-store';
import type { RedlockSettings } from '../../../lib/core/base/settings';
import { FAIR_DEFAULTS, enginesOver, useMasters } from '../../harness/engines';
import type { EngineSet } from '../../harness/engines';
import { sleep, uniqueResource, waitUntil } from '../../harness/util';

const PREFIX = 'lock:'; // the default keyPrefix
const suite = useMasters(3, FAIR_DEFAULTS);
const cleanup: (() => void)[] = [];
afterEach(() => {
  for (const f of cleanup.splice(0)) f();
});

/**
 * Runs `body` with three engines over the suite's masters (the first with `first` over the
 * suite's settings), closed afterwards.
 */
async function withEngines(
  body: (e: EngineSet) => Promise<void>,
  first: RedlockSettings = {},
): Promise<void> {
  const e = await enginesOver(suite.clients, 3, first);
  try {
    await body(e);
  } finally {
    await e.close();
  }
}

/** Longer than any wait below: a key that is gone was deleted, it did not expire. */
const TTL = 30_000;

/** A retrying plain attempt of `r` (ordered: it parks when the engine hears `r`'s releases). */
const retrying = (r: string, waitSince: number): FairAttemptRequest => ({
  resources: [r],
  ttl: TTL,
  writerWait: 500,
  waitSince,
});

/** `store`'s outcomes of installs (its engine's queue no longer gets them). */
function outcomes(store: FairRedisStore): (FairGrant | undefined)[] {
  const got: (FairGrant | undefined)[] = [];
  store.onInstalled((_resource, grant) => got.push(grant));
  return got;
}

/**
 * `b` waits for `r` held by `a`: it watches `r` and its refused attempt parks a token (`token`,
 * as master 0 has it).
 */
async function parkedBehind(
  a: FairRedisStore,
  b: FairRedisStore,
  r: string,
): Promise<{
  held: FairGrant;
  watch: ReleaseWatch;
  sent: number;
  refusedAt: number;
  token: string;
}> {
  const held = await a.attempt(retrying(r, 1));
  expect(held.grant).toBeDefined();
  const watch = await b.watchReleases(r, () => undefined);
  expect(watch?.live).toBe(true);
  const sent = monotonicNow();
  expect((await b.attempt(retrying(r, 1000))).grant).toBeUndefined();
  const refusedAt = monotonicNow();
  // (Refused at a quorum: the last master may still be running the attempt that parks there.)
  await waitUntil(async () => (await parkedOn(r, b.engineId)).every((t) => t !== undefined));
  const token = (await parkedOn(r, b.engineId))[0] as string;
  return { held: held.grant as FairGrant, watch: watch as ReleaseWatch, sent, refusedAt, token };
}

/** The token `engineId` parked for `r` on each master (undefined where none). */
function parkedOn(r: string, engineId: string): Promise<(string | undefined)[]> {
  return Promise.all(
    suite.probe.map(async (c) => (await c.hget(parkKey(PREFIX, r), engineId))?.split(' ')[0]),
  );
}

/**
 * `b` and then `c` wait for `r` held by `a` (both parked); `a`'s yield runs on masters 1 and 2
 * only (master 0 was descheduled: it comes later there), so `b` is installed on a quorum and
 * granted. Returns a's lock, b's installed grant and what c is granted from then on.
 */
async function installedAheadOfMaster0(
  a: FairRedisStore,
  b: FairRedisStore,
  c: FairRedisStore,
  r: string,
): Promise<{
  held: FairGrant;
  installed: FairGrant;
  gotC: (FairGrant | undefined)[];
  stop: () => void;
}> {
  const got = outcomes(b);
  const gotC = outcomes(c);
  const { held, watch } = await parkedBehind(a, b, r);
  const watchC = await c.watchReleases(r, () => undefined);
  expect((await c.attempt(retrying(r, 2000))).grant).toBeUndefined();
  await waitUntil(async () => (await parkedOn(r, c.engineId)).every((t) => t !== undefined));
  await a.release(held, true, undefined, [1, 2], 'yield');
  await waitUntil(() => got.length > 0);
  const installed = got[0] as FairGrant;
  expect(installed.installedBy).toBe(held.token);
  const stop = (): void => {
    watch.stop();
    watchC?.stop();
  };
  return { held, installed, gotC, stop };
}

/** `a`'s late yield on master 0; then c's token holds `r` on every master, and is released. */
async function lateYieldNamesC(
  a: FairRedisStore,
  c: FairRedisStore,
  held: FairGrant,
  gotC: (FairGrant | undefined)[],
  r: string,
): Promise<void> {
  await a.release(held, true, undefined, [0], 'yield');
  await waitUntil(() => gotC.length > 0);
  const cToken = (gotC[0] as FairGrant).token;
  await waitUntil(async () =>
    (await Promise.all(suite.probe.map((p) => p.get(a.keyOf(r))))).every((v) => v === cToken),
  );
  await c.release(gotC[0] as FairGrant, true);
}

describe('hand-over across processes', () => {
  it('a yield installs the parked token of the engine it names: granted without an acquire', () =>
    withEngines(async ({ all }) => {
      const [a, b] = all;
      const got = outcomes(b);
      const r = uniqueResource('install');
      const { held, watch, sent, refusedAt } = await parkedBehind(a, b, r);
      const parked = await parkedOn(r, b.engineId);
      expect(new Set(parked).size).toBe(1);
      const token = parked[0] as string;
      expect(token.startsWith(b.engineId)).toBe(true);
      await a.release(held, true, undefined, undefined, 'yield');
      await waitUntil(() => got.length > 0);
      const grant = got[0] as FairGrant;
      expect(grant.token).toBe(token);
      // Installed by a's yield on every master: its release sends a's token along
      // (redis/scripts/release.ts ARGV[14]; test/core/fair/behind-pass.spec.ts).
      expect(grant.installedBy).toBe(held.token);
      expect(grant.resources).toEqual([r]);
      expect(grant.ttl).toBe(TTL);
      // Validity runs from the token's first send: the refused attempt that parked it.
      expect(grant.start).toBeGreaterThanOrEqual(sent);
      expect(grant.start).toBeLessThanOrEqual(refusedAt);
      expect(grant.votes.filter((v) => v.outcome === 'ok').length).toBeGreaterThanOrEqual(2);
      expect(grant.fencingTokens[0]).toBeGreaterThan(held.fencingTokens[0]);
      for (const c of suite.probe) {
        expect(await c.get(a.keyOf(r))).toBe(token);
        const ttl = await c.pttl(a.keyOf(r));
        expect(ttl).toBeGreaterThan(0);
        expect(ttl).toBeLessThanOrEqual(TTL);
      }
      // Used up: no longer parked, and b is off the order.
      expect(await parkedOn(r, b.engineId)).toEqual([undefined, undefined, undefined]);
      for (const c of suite.probe) {
        expect(await c.zscore(orderKey(PREFIX, r), b.engineId)).toBeNull();
      }
      await b.release(grant, true);
      for (const c of suite.probe) expect(await c.exists(a.keyOf(r))).toBe(0);
      watch.stop();
    }));

  it("a pass of an installed lock names nobody where its installer's yield has not run yet", () =>
    withEngines(async ({ all }) => {
      const [a, b, c] = all;
      const r = uniqueResource('install-behind');
      const { held, installed, gotC, stop } = await installedAheadOfMaster0(a, b, c, r);
      // b's pass reaches master 0 first: a's key is still there. It names c on masters 1 and 2
      // (installed), and nobody on master 0 ...
      await b.release(installed, true, undefined, undefined, 'pass');
      expect(await suite.probe[0].get(a.keyOf(r))).toBe(held.token);
      expect(await suite.probe[0].zrange(orderKey(PREFIX, r), '0', '-1')).toContain(c.engineId);
      // ... where a's yield, when it comes, names c as well: c holds all three masters.
      await lateYieldNamesC(a, c, held, gotC, r);
      stop();
    }));

  it("a local hand-over's lock carries installedBy on: its pass names nobody where the yield has not run", () =>
    withEngines(async ({ all }) => {
      const [a, b, c] = all;
      const r = uniqueResource('install-handover-behind');
      const { held, installed, gotC, stop } = await installedAheadOfMaster0(a, b, c, r);
      // b hands the lock to its next local waiter (masters 1 and 2; master 0 still has a's key).
      const taken = await b.attempt({
        resources: [r],
        ttl: TTL,
        handoverFrom: installed.token,
        installedBy: installed.installedBy,
      });
      const grant = taken.grant as FairGrant;
      expect(grant).toBeDefined();
      expect(grant.installedBy).toBe(held.token);
      // The streak's end: its pass reaches master 0 before a's yield. There it names nobody
      // (without installedBy it would take c off that master's order, and a's yield would then
      // name nobody there: c short of master 0) ...
      await b.release(grant, true, undefined, undefined, 'pass');
      expect(await suite.probe[0].get(a.keyOf(r))).toBe(held.token);
      expect(await suite.probe[0].zrange(orderKey(PREFIX, r), '0', '-1')).toContain(c.engineId);
      // ... and a's yield, when it comes, names c there as b's pass did elsewhere.
      await lateYieldNamesC(a, c, held, gotC, r);
      stop();
    }));

  it('a token parked longer ago than its life is not installed: the yield reserves as before', () =>
    withEngines(async ({ all }) => {
      const [a, b] = all;
      const got = outcomes(b);
      const r = uniqueResource('install-stale');
      const { held, watch } = await parkedBehind(a, b, r);
      await sleep(PARK_LIFE_MS + 50); // (the masters' clocks decide)
      await a.release(held, true, undefined, undefined, 'yield');
      for (const c of suite.probe) {
        expect(await c.exists(a.keyOf(r))).toBe(0);
        const first = await c.zrange(orderKey(PREFIX, r), '0', '0', 'WITHSCORES');
        expect(first[0]).toMatch(new RegExp(`^\\d+:${b.engineId}$`)); // the reservation
      }
      expect(got).toStrictEqual([]);
      watch.stop();
    }));

  /**
   * `b` parks behind `a`'s lock (the first engine: with `first`), `before` runs, `a` yields: the
   * install is not granted — `b` is told (`undefined`), the token is deleted on every master.
   */
  const notGranted = (
    label: string,
    before: (b: FairRedisStore, r: string) => Promise<void>,
    first?: RedlockSettings,
  ): Promise<void> =>
    withEngines(async ({ all }) => {
      const [a, b] = all;
      const got = outcomes(b);
      const r = uniqueResource(label);
      const { held, watch } = await parkedBehind(a, b, r);
      await before(b, r);
      await a.release(held, true, undefined, undefined, 'yield');
      await waitUntil(() => got.length > 0, 5000);
      expect(got).toStrictEqual([undefined]); // the waiter attempts
      await waitUntil(async () =>
        (await Promise.all(suite.probe.map((c) => c.exists(a.keyOf(r))))).every((e) => e === 0),
      );
      watch.stop();
    }, first);

  it('an install that fewer than a quorum announced is deleted everywhere, and the waiter told', () =>
    // Parked on one master only: installed there alone.
    notGranted('install-minority', async (b, r) => {
      for (const c of suite.probe.slice(1)) await c.hdel(parkKey(PREFIX, r), b.engineId);
    }));

  /** Announces on `c`, as a pass would, that `from`'s release at `key` installed `to`. */
  const announceInstall = (
    c: (typeof suite.probe)[number],
    key: string,
    from: string,
    to: string,
  ): Promise<number> => c.publish(key, `^${from}:${to.slice(0, 12)}:${to}:1:-1`);

  it('an install split so that no token can reach a quorum fails at once, not at the timeout', () =>
    withEngines(
      async ({ all }) => {
        // The waiter is the first engine: its request timeout (the install's deadline) is 8 s.
        const [b, a] = all;
        const got = outcomes(b);
        const r = uniqueResource('install-hopeless');
        const { held, watch, token } = await parkedBehind(a, b, r);
        const sub = suite.probe[0].duplicate({ enableOfflineQueue: true });
        cleanup.push(() => sub.disconnect());
        const messages: string[] = [];
        sub.on('message', (_channel: string, message: string) => messages.push(message));
        await sub.subscribe(a.keyOf(r));
        // Masters 1 and 2 announce installs of one token of another engine (a pass the masters
        // ran for another head): that token may still make a quorum, b's install waits.
        const x = `${'e'.repeat(12)}${'x'.repeat(22)}`;
        for (const c of suite.probe.slice(1))
          await announceInstall(c, a.keyOf(r), 'y'.repeat(34), x);
        await a.release(held, true, undefined, [0], 'yield');
        expect(await suite.probe[0].get(a.keyOf(r))).toBe(token);
        await sleep(200);
        expect(got).toStrictEqual([]);
        expect((await parkedOn(r, b.engineId)).slice(1)).toStrictEqual([token, token]);
        // Then master 2 announces that x's release there installed a third token: no token can
        // reach a quorum any more before another is deleted. Told and deleted at once, well
        // before the 8 s request timeout.
        await announceInstall(suite.probe[2], a.keyOf(r), x, `${'f'.repeat(12)}${'z'.repeat(22)}`);
        await waitUntil(() => got.length > 0, 5000);
        expect(got).toStrictEqual([undefined]);
        await waitUntil(async () => (await suite.probe[0].exists(a.keyOf(r))) === 0, 5000);
        // Announced as the clean-up of a failed attempt: the waiters it wakes spread out.
        await waitUntil(() => messages.includes(`~${token}`), 5000);
        expect(messages).not.toContain(token);
        // And taken off the park where it was not installed (masters 1 and 2): a later pass
        // there would install a token nobody can use.
        await waitUntil(async () => (await parkedOn(r, b.engineId)).every((t) => t !== token));
        await a.release(held, true);
        watch.stop();
      },
      { requestTimeout: 8000 },
    ));

  it('an engine granted by an attempt takes its parked token off where the attempt was refused', () =>
    withEngines(async ({ all }) => {
      const [a, b] = all;
      const r = uniqueResource('install-retired');
      const { held, watch, token } = await parkedBehind(a, b, r);
      expect(await parkedOn(r, b.engineId)).toStrictEqual([token, token, token]);
      // a's key goes on masters 1 and 2 only: b's next attempt is granted there, refused by
      // master 0, where b's token stays parked — and b still heads the order there, so another
      // engine's attempt that finds the key free would install it for b.
      await a.release(held, true, undefined, [1, 2]);
      const mine = await b.attempt(retrying(r, 1000));
      expect(mine.grant).toBeDefined();
      await waitUntil(async () => (await parkedOn(r, b.engineId))[0] === undefined);
      expect(await parkedOn(r, b.engineId)).toStrictEqual([undefined, undefined, undefined]);
      await b.release(mine.grant as FairGrant, true);
      await a.release(held, true);
      watch.stop();
    }));

  it('an install without a fencing counter does not grant an engine that fences', () =>
    // The yielding engine does not fence (another setting on the same resource): its installs
    // carry no counter, so the named engine, which fences, could not give a fencing token.
    notGranted('install-unfenced', () => Promise.resolve(), { fencing: false }));

  it('an install of a token the engine does not park is deleted where it was set', () =>
    withEngines(async ({ all }) => {
      const [a, b] = all;
      const got = outcomes(b);
      const r = uniqueResource('install-unknown');
      const sub = suite.probe[0].duplicate({ enableOfflineQueue: true });
      cleanup.push(() => sub.disconnect());
      const { held, watch } = await parkedBehind(a, b, r);
      // A token of b's engine that b never parked (one from before a restart, say).
      const forged = `${b.engineId}${'x'.repeat(22)}`;
      for (const c of suite.probe) {
        await c.hset(parkKey(PREFIX, r), b.engineId, `${forged} ${TTL} 99999999999999`);
      }
      const messages: string[] = [];
      sub.on('message', (_channel: string, message: string) => messages.push(message));
      await sub.subscribe(a.keyOf(r));
      await a.release(held, true, undefined, undefined, 'yield');
      // Installed (announced: the probe hears the first master), then deleted by b.
      await waitUntil(() => messages.some((m) => m.includes(`:${forged}:`)));
      await waitUntil(async () =>
        (await Promise.all(suite.probe.map((c) => c.exists(a.keyOf(r))))).every((e) => e === 0),
      );
      expect(got).toStrictEqual([]);
      watch.stop();
    }));

  it('an engine whose queue ended deletes its token where a yield installed it unheard', () =>
    withEngines(async ({ all }) => {
      const [a, b] = all;
      const r = uniqueResource('install-unheard');
      const { held, watch, token } = await parkedBehind(a, b, r);
      watch.stop(); // nobody at b hears the install
      await a.release(held, true, undefined, undefined, 'yield');
      for (const c of suite.probe) expect(await c.get(a.keyOf(r))).toBe(token);
      b.unmarkPolling(r);
      await waitUntil(async () =>
        (await Promise.all(suite.probe.map((c) => c.exists(a.keyOf(r))))).every((e) => e === 0),
      );
    }));

  it('a late install of a token whose lock already ended is deleted there', () =>
    withEngines(async ({ all }) => {
      const [a, b] = all;
      const got = outcomes(b);
      const r = uniqueResource('install-late');
      const { held, watch } = await parkedBehind(a, b, r);
      // The yield reaches masters 0 and 1 (a quorum of 3) first: b is granted, holds, releases.
      await a.release(held, true, undefined, [0, 1], 'yield');
      await waitUntil(() => got.length > 0);
      const grant = got[0] as FairGrant;
      await b.release(grant, true);
      grant.ended = true; // (as the engine marks a released lock)
      // Then it reaches master 2, which still has b's token parked: installed there, after the
      // lock ended — b deletes it instead of leaving it for a whole ttl.
      await a.release(held, true, undefined, [2], 'yield');
      await waitUntil(async () => (await suite.probe[2].exists(a.keyOf(r))) === 0);
      watch.stop();
    }));

  it('an engine whose queue ended deletes every token it parked where a yield installed it', () =>
    withEngines(async ({ all }) => {
      const [a, b] = all;
      const r = uniqueResource('install-tokens');
      const { held, watch } = await parkedBehind(a, b, r);
      const first = await suite.probe[0].hget(parkKey(PREFIX, r), b.engineId);
      const [token] = (first as string).split(' ');
      // Half a park's life later, b parks a new token; master 0 keeps the first one.
      await sleep(PARK_LIFE_MS / 2 + 10);
      expect((await b.attempt(retrying(r, 1000))).grant).toBeUndefined();
      // (Refused at a quorum: the last master may still be running the attempt that parks there.)
      await waitUntil(async () =>
        (await parkedOn(r, b.engineId)).every((t) => t !== undefined && t !== token),
      );
      // (Installable whatever the time: only which token is parked where matters here.)
      await suite.probe[0].hset(parkKey(PREFIX, r), b.engineId, `${token} ${TTL} 99999999999999`);
      const tokens = await parkedOn(r, b.engineId);
      expect(tokens[0]).not.toBe(tokens[1]);
      watch.stop(); // nobody at b hears the installs
      await a.release(held, true, undefined, undefined, 'yield');
      expect(await Promise.all(suite.probe.map((c) => c.get(a.keyOf(r))))).toEqual(tokens);
      b.unmarkPolling(r);
      await waitUntil(async () =>
        (await Promise.all(suite.probe.map((c) => c.exists(a.keyOf(r))))).every((e) => e === 0),
      );
    }));

  it('engines that hand a resource over by installs never hold it together; fencing grows', () =>
    withEngines(async ({ all, locks }) => {
      const r = uniqueResource('install-rotation');
      let installs = 0;
      for (const s of all) {
        const grant = (s.installs as unknown as { grant: (...a: unknown[]) => void }).grant;
        (s.installs as unknown as { grant: (...a: unknown[]) => void }).grant = function (
          this: unknown,
          ...args: unknown[]
        ) {
          installs++;
          grant.apply(this, args);
        };
      }
      let holder: Redlock | undefined;
      let overlaps = 0;
      const fences: number[] = [];
      let open = true;
      const stop = waitUntil(() => installs >= 5, 20_000).finally(() => (open = false));
      await Promise.all(
        locks.flatMap((engine) =>
          // Four callers each: a local waiter sleeps at every release, so streaks end in yields.
          [0, 1, 2, 3].map(async () => {
            while (open) {
              const lock = await engine.acquire(r, { ttl: 5000, retryCount: 100_000 });
              if (holder) overlaps++;
              holder = engine;
              fences.push(lock.fencingToken as number);
              await sleep(1);
              holder = undefined;
              await lock.release();
            }
          }),
        ),
      );
      await stop;
      expect(installs).toBeGreaterThanOrEqual(5);
      expect(overlaps).toBe(0);
      for (let i = 1; i < fences.length; i++) expect(fences[i]).toBeGreaterThan(fences[i - 1]);
    }));

  it('an install on a master whose data set is younger than a second starts no fencing counter there', async () => {
    // As an acquire would not (redis/scripts/fencing.ts YOUNG_DATA_SET_MS): a counter started in
    // a restarted master's first second may restart below the tokens handed out in that second.
    // Engines that check the boot marker; every master's marker old, master 0's made young (its
    // counter gone, as after a restart) before the yield that installs b's token everywhere.
    const marker = markerKey(PREFIX);
    const old = await Promise.all(suite.probe.map((p) => p.get(marker)));
    const longAgo = Date.now() - 600_000;
    await Promise.all(suite.probe.map((p) => p.set(marker, String(longAgo))));
    // (The engines also take a server started less than the quarantine ago as restarted.)
    const uptime = async (p: (typeof suite.probe)[number]): Promise<number> =>
      Number(/uptime_in_seconds:(\d+)/.exec(await p.info('server'))?.[1]);
    await waitUntil(
      async () => (await Promise.all(suite.probe.map(uptime))).every((s) => s >= 2),
      5000,
    );
    const e = await enginesOver(suite.clients, 2, {}, { quarantine: { duration: 1000 } });
    try {
      const [a, b] = e.all;
      const got = outcomes(b);
      const r = uniqueResource('install-young');
      const { held, watch } = await parkedBehind(a, b, r);
      const [sec, usec] = await suite.probe[0].time();
      await suite.probe[0].set(
        marker,
        String(Number(sec) * 1000 + Math.floor(Number(usec) / 1000)),
      );
      await suite.probe[0].del(fenceKey(PREFIX, r));
      await a.release(held, true, undefined, undefined, 'yield');
      await waitUntil(() => got.length > 0);
      const grant = got[0] as FairGrant;
      // Installed on master 0 too (its yield may run after the others were heard).
      await waitUntil(async () => (await suite.probe[0].get(a.keyOf(r))) === grant.token);
      expect(grant.fencingTokens[0]).toBeGreaterThan(held.fencingTokens[0]);
      expect(await suite.probe[0].exists(fenceKey(PREFIX, r))).toBe(0);
      for (const p of suite.probe.slice(1)) expect(await p.exists(fenceKey(PREFIX, r))).toBe(1);
      await b.release(grant, true);
      watch.stop();
    } finally {
      await e.close();
      await Promise.all(
        suite.probe.map((p, i) => (old[i] === null ? p.del(marker) : p.set(marker, old[i]))),
      );
    }
  });
});
