/**
 * A Redis Cluster as one of the Redlock masters. Lock keys are `prefix{resource}`, so each
 * resource's lock and fencing keys share a hash slot; a multi-resource lock is split per slot on
 * a Cluster master (one all-or-nothing script per slot), so it never fails with CROSSSLOT —
 * whatever braces the resource names contain.
 */
import { Cluster } from 'ioredis';
import type { Redis } from 'ioredis';
import { randomBytes } from 'node:crypto';
import { LockContendedError } from '../../lib/core/base/errors';
import {
  SLOTS,
  fenceKey,
  keySlot,
  lockKey,
  markerKey,
  slotTag,
  waitKey,
} from '../../lib/core/base/keys';
import { pollKey } from '../../lib/core/fair/fair-keys';
import { Redlock } from '../../lib/core/redlock';
import type { RedlockSettings } from '../../lib/core/base/settings';
import { MAX_LOCAL_STREAK } from '../../lib/core/fair/streak';
import { LocalCluster, RedisMasters } from '../harness/redis-masters';
import { observedStore } from '../harness/engines';
import { contend, longestStreak } from '../harness/two-engines';
import { uniqueResource, waitUntil } from '../harness/util';

let cluster: LocalCluster;
let masters: RedisMasters;
let clusterClient: Cluster;
let standalone: Redis[];
let rl: Redlock;

beforeAll(async () => {
  [cluster, masters] = await Promise.all([LocalCluster.start(3), RedisMasters.start(2)]);
  clusterClient = new Cluster(cluster.seeds, {
    enableOfflineQueue: true,
    redisOptions: { maxRetriesPerRequest: 1 },
  });
  clusterClient.on('error', () => undefined);
  standalone = masters.createClients();
  await RedisMasters.ready(standalone);
  await waitUntil(() => clusterClient.status === 'ready', 20_000);
  // quorum 3 of 3: every master, the Cluster included, must vote yes.
  rl = new Redlock([clusterClient, ...standalone], {
    quarantine: false,
    requestTimeout: 200,
    quorum: 3,
  });
});

afterAll(async () => {
  await rl?.close();
  clusterClient.disconnect();
  await masters.stop();
  await cluster.stop();
});

it('locks several resources in different slots on a Cluster master without CROSSSLOT', async () => {
  const resources = Array.from({ length: 6 }, (_, i) => uniqueResource(`multi${i}`));
  expect(new Set(resources.map((r) => keySlot(rl.keyOf(r)))).size).toBeGreaterThan(1);
  const lock = await rl.acquire(resources);
  expect(lock.votes[0].outcome).toBe('ok'); // the Cluster master voted yes
  const values = await Promise.all(resources.map((r) => clusterClient.get(rl.keyOf(r))));
  expect(values).toEqual(Array(6).fill(lock.value));
  for (const r of resources) expect(lock.fencingTokens[r]).toBeGreaterThan(0);

  // All-or-nothing: one resource held elsewhere makes the whole multi-resource lock contended.
  const error = await rl
    .acquire([resources[2], uniqueResource('other')], { retryCount: 0 })
    .catch((e: unknown) => e);
  expect(error).toBeInstanceOf(LockContendedError);

  await lock.extend(5000);
  const released = await lock.release();
  expect(released.votes[0].outcome).toBe('ok');
  const after = await Promise.all(resources.map((r) => clusterClient.get(rl.keyOf(r))));
  expect(after).toEqual(Array(6).fill(null));
});

/** Resource strings whose braces would break a naive `{resource}` hash tag. */
const AWKWARD = ['}', '}a', 'a}', '{', '{}', '}{', '{{}}', 'a{b}c', 'x}y{z', '{a}', '}}}', '{{'];

it('locks any resource string on a Cluster master, braces included, alone and all at once', async () => {
  const id = randomBytes(4).toString('hex');
  const resources = AWKWARD.flatMap((a) => [`${a}${id}`, `${id}${a}`, `${a}:${id}:${a}`]);
  for (const r of resources) {
    const lock = await rl.acquire(r, { retryCount: 0 });
    expect(lock.votes[0].outcome).toBe('ok'); // the Cluster master voted yes (no CROSSSLOT)
    expect(await clusterClient.get(rl.keyOf(r))).toBe(lock.value);
    expect(lock.fencingTokens[r]).toBeGreaterThan(0);
    await lock.extend(5000);
    expect((await lock.release()).votes[0].outcome).toBe('ok');
    expect(await clusterClient.get(rl.keyOf(r))).toBeNull();
  }
  const all = await rl.acquire(resources, { retryCount: 0 });
  expect(all.votes[0].outcome).toBe('ok');
  expect(Object.keys(all.fencingTokens)).toHaveLength(resources.length);
  const error = await rl.acquire(resources[5], { retryCount: 0 }).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(LockContendedError);
  await all.release();
  const left = await Promise.all(resources.map((r) => clusterClient.get(rl.keyOf(r))));
  expect(left).toEqual(Array(resources.length).fill(null));
});

it("key formats keep a resource's lock key, counter, flag and poll mark in one slot; one counter per slot", () => {
  // Every string of length 1..6 over '{', '}', 'a' (1,092 resources).
  const resources: string[] = [];
  let layer = [''];
  for (let n = 1; n <= 6; n++) {
    layer = layer.flatMap((s) => ['{', '}', 'a'].map((c) => s + c));
    resources.push(...layer);
  }
  for (const prefix of ['lock:', 'app:locks:']) {
    const locks = resources.map((r) => lockKey(prefix, r));
    const fences = resources.map((r) => fenceKey(prefix, r));
    const waits = resources.map((r) => waitKey(prefix, r));
    const polls = resources.map((r) => pollKey(prefix, r));
    // Lock keys, flags and marks are injective; counters are one per slot, never another key.
    const perResource = new Set([...locks, ...waits, ...polls, markerKey(prefix)]);
    expect(perResource.size).toBe(3 * resources.length + 1);
    const counters = new Set(fences);
    for (const f of counters) expect(perResource.has(f)).toBe(false);
    const slots = new Set(locks.map((k) => keySlot(k)));
    expect(counters.size).toBe(slots.size);
    resources.forEach((r, i) => {
      const slot = keySlot(locks[i]);
      for (const other of [fences[i], waits[i], polls[i]]) {
        if (keySlot(other) !== slot) throw new Error(`${JSON.stringify(r)}: different slots`);
        expect(other.startsWith(prefix)).toBe(true);
      }
      expect(locks[i].startsWith(prefix)).toBe(true);
    });
    // A resource without '}' keeps the key format of earlier versions; its counter is its slot's.
    expect(lockKey(prefix, 'a{b')).toBe(`${prefix}{a{b}`);
    expect(fenceKey(prefix, 'order:42')).toBe(`${prefix}fence:{${slotTag(keySlot('{order:42}'))}}`);
  }
});

it('every slot has a tag of 1 to 4 base-36 digits that hashes to it, the first in counting order', () => {
  const seen = new Set<string>();
  for (let slot = 0; slot < SLOTS; slot++) {
    const tag = slotTag(slot);
    expect(keySlot(`{${tag}}`)).toBe(slot);
    expect(tag).toMatch(/^(0|[1-9a-z][0-9a-z]{0,3})$/);
    seen.add(tag);
  }
  expect(seen.size).toBe(SLOTS);
  // Counting order: no smaller base-36 number hashes to the slot of a tag.
  for (const slot of [0, 1, 100, 8191, 16383]) {
    const n = parseInt(slotTag(slot), 36);
    for (let i = 0; i < n; i++) expect(keySlot(`{${i.toString(36)}}`)).not.toBe(slot);
  }
});

describe('release announcements on a Cluster master', () => {
  let one: LocalCluster;
  let oneClient: Cluster;
  const engines: Redlock[] = [];
  /** An engine whose only master is `client` (quorum 1). */
  const only = (client: Cluster, settings: RedlockSettings): Redlock => {
    const e = new Redlock([client], { quarantine: false, requestTimeout: 250, ...settings });
    engines.push(e);
    return e;
  };

  beforeAll(async () => {
    one = await LocalCluster.start(1); // one node: its NUMSUB counts every engine's watch
    oneClient = new Cluster(one.seeds, {
      enableOfflineQueue: true,
      redisOptions: { maxRetriesPerRequest: 1 },
    });
    oneClient.on('error', () => undefined);
    await waitUntil(() => oneClient.status === 'ready', 20_000);
  });

  afterAll(async () => {
    await Promise.all(engines.map((e) => e.close()));
    oneClient?.disconnect();
    await one?.stop();
  });

  it("wake a waiter of another engine at the holder's release, on a Cluster of three nodes", async () => {
    // Without announcements the waiter would poll: its next attempt after retryDelay (20 s).
    const holderEngine = only(clusterClient, {});
    let attempts = 0;
    const waiterEngine = new Redlock(
      observedStore([clusterClient], () => attempts++),
      { quarantine: false, requestTimeout: 250, retryDelay: 20_000, retryJitter: 0 },
    );
    engines.push(waiterEngine);
    const r = uniqueResource('cluster-wake');
    const holder = await holderEngine.acquire(r, { ttl: 30_000 });
    const started = Date.now();
    const pending = waiterEngine.acquire(r, { ttl: 30_000, waitTimeout: 25_000 });
    // Refused, then (announcements live) the retry made once subscribed: it sleeps from here.
    await waitUntil(() => attempts >= 2, 10_000);
    await holder.release();
    const next = await pending;
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(attempts).toBeLessThanOrEqual(3);
    await next.release();
  });

  /** The two engines' settings in the fairness tests (fairness across processes). */
  const fair: RedlockSettings = {
    retryDelay: 10,
    retryJitter: 10,
    retryCount: 100_000,
    fairness: 'across-processes',
  };

  it('with fairness across processes, two engines on one resource: neither keeps the lock while the other waits', async () => {
    const a = only(oneClient, fair);
    const b = only(oneClient, fair);
    const grants = await contend(a, b, uniqueResource('cluster-two'), 8);
    expect(grants).toHaveLength(8 * 8);
    // Without announcements the engine that got the lock first handed it to its own callers
    // until they were done (32 in a row): the other engine's polls never found the key free.
    expect(longestStreak(grants)).toBeLessThanOrEqual(2 * (MAX_LOCAL_STREAK + 1));
  });

  it('with fairness across processes, two engines on a Cluster of three nodes: poll marks bound the streak where NUMSUB cannot', async () => {
    // A watch subscribes on one node; the lock key's node may not count it (PUBSUB NUMSUB is per
    // node), and the streak was then bounded by MAX_ALONE_STREAK only: 32 in a row here. The
    // waiters' poll marks live in the lock key's slot, so the holder's hand-overs see them.
    const a = only(clusterClient, fair);
    const b = only(clusterClient, fair);
    const grants = await contend(a, b, uniqueResource('cluster-three'), 8);
    expect(grants).toHaveLength(8 * 8);
    expect(longestStreak(grants)).toBeLessThanOrEqual(2 * (MAX_LOCAL_STREAK + 1));
  });
});
