/**
 * Extend, release and inspect of the lock kinds (lib/core/redis/kinds/holder-scripts.ts), run with EVAL
 * against a real redis-server; and every kind script on a Redis Cluster master without CROSSSLOT.
 * The acquire side: kinds-scripts.spec.ts.
 */
import { Cluster, type Redis } from 'ioredis';
import { randomBytes } from 'node:crypto';
import {
  HOLDERS_EXTEND_SCRIPT,
  HOLDERS_RELEASE_SCRIPT,
} from '../../lib/core/redis/kinds/holder-scripts';
import {
  decodeInspect,
  decodeKindAcquire,
  decodeKindExtend,
  decodeKindRelease,
} from '../../lib/core/redis/kinds/kind';
import { INSPECT_READ_SCRIPT } from '../../lib/core/redis/scripts/inspect';
import { SEMAPHORE_ACQUIRE_SCRIPT } from '../../lib/core/redis/kinds/semaphore-scripts';
import {
  SHARED_ACQUIRE_SCRIPT,
  WRITE_ACQUIRE_SCRIPT,
} from '../../lib/core/redis/kinds/shared-scripts';
import { keySlot } from '../../lib/core/base/keys';
import { type Client, acquireLayout, key, run, snapshot, wkey } from '../harness/kind-scripts';
import { useMasters } from '../harness/engines';
import { LocalCluster } from '../harness/redis-masters';
import { uniqueResource, waitUntil } from '../harness/util';

const suite = useMasters(1);
let c: Redis;
let sub: Redis;

beforeAll(() => {
  [c] = suite.clients;
  [sub] = suite.probe; // a second connection to the same master, for SUBSCRIBE
});

const tok = (label: string): string => `${label}-${randomBytes(6).toString('base64url')}`;

// `fencing` draws fencing counters (keys in the resource's slot, like the writer-waiting flags).
async function semaphore(
  cl: Client,
  rs: string[],
  limit: number,
  token: string,
  ttl = 10_000,
  fencing = false,
) {
  const { keys, args } = acquireLayout(rs, { token, ttl, fencing }, false);
  const reply = await run(cl, SEMAPHORE_ACQUIRE_SCRIPT, keys, [...args, String(limit)]);
  return decodeKindAcquire(reply, fencing ? rs.length : 0);
}

async function reader(cl: Client, rs: string[], token: string, ttl = 10_000, fencing = false) {
  const { keys, args } = acquireLayout(rs, { token, ttl, fencing }, true);
  return decodeKindAcquire(
    await run(cl, SHARED_ACQUIRE_SCRIPT, keys, args),
    fencing ? rs.length : 0,
  );
}

async function writer(
  cl: Client,
  rs: string[],
  token: string,
  waitTtl: number,
  ttl = 10_000,
  fencing = false,
) {
  const { keys, args } = acquireLayout(rs, { token, ttl, fencing }, true);
  const reply = await run(cl, WRITE_ACQUIRE_SCRIPT, keys, [...args, String(waitTtl)]);
  return decodeKindAcquire(reply, fencing ? rs.length : 0);
}

async function extend(cl: Client, rs: string[], token: string, ttl: number): Promise<boolean> {
  return decodeKindExtend(await run(cl, HOLDERS_EXTEND_SCRIPT, rs.map(key), [token, String(ttl)]));
}

async function release(cl: Client, rs: string[], token: string, publish = true): Promise<number> {
  const reply = await run(cl, HOLDERS_RELEASE_SCRIPT, rs.map(key), [token, publish ? '1' : '0']);
  return decodeKindRelease(reply, rs.length);
}

/** The engine's read-only inspect (`Redlock.inspect`), with the writer-waiting flag's PTTL. */
async function inspect(cl: Client, r: string) {
  const reply = (await run(cl, INSPECT_READ_SCRIPT, [key(r)], ['0'])) as unknown[];
  const waiting = Math.max(0, await cl.pttl(wkey(r)));
  return { ...decodeInspect([...reply.slice(0, 4), waiting]) };
}

describe('extend', () => {
  it('moves only this holder’s expiry and the key TTL to the latest expiry', async () => {
    const r = uniqueResource('ext');
    const [a, b] = [tok('a'), tok('b')];
    // seconds, not a few hundred ms: a's membership must still be alive at the first extend
    expect((await semaphore(c, [r], 2, a, 5_000)).status).toBe('granted');
    expect((await semaphore(c, [r], 2, b, 10_000)).status).toBe('granted');
    const bBefore = await c.zscore(key(r), b);
    expect(await extend(c, [r], a, 30_000)).toBe(true);
    expect(await c.zscore(key(r), b)).toBe(bBefore);
    expect(await c.pttl(key(r))).toBeGreaterThan(29_000);
    // a shorter ttl shortens the membership, and the key follows the latest remaining expiry
    expect(await extend(c, [r], a, 500)).toBe(true);
    expect(await c.pttl(key(r))).toBeLessThanOrEqual(10_000);
  });

  it('never re-creates: released, expired, missing or another kind answer 0 and change nothing', async () => {
    const [r, gone, str] = [uniqueResource('ext-r'), uniqueResource('gone'), uniqueResource('str')];
    const [a, b] = [tok('a'), tok('b')];
    // b first: an acquire prunes expired memberships, so a later grant of b on a loaded machine
    // (more than 50 ms after a's) would remove a's entry before the extend below sees it
    expect((await reader(c, [r], b, 10_000)).status).toBe('granted');
    expect((await reader(c, [r], a, 50)).status).toBe('granted');
    // a's membership expires while b keeps the key alive
    await waitUntil(async () => (await inspect(c, r)).holders === 1);
    expect(await c.zscore(key(r), a)).not.toBeNull(); // still there, not pruned by inspect
    expect(await extend(c, [r], a, 10_000)).toBe(false);
    expect(Number(await c.zscore(key(r), a))).toBeLessThan(Date.now() + 1_000);
    // released
    expect(await release(c, [r], b)).toBe(1);
    expect(await extend(c, [r], b, 10_000)).toBe(false);
    expect(await c.exists(key(r))).toBe(0);
    // never existed
    expect(await extend(c, [gone], a, 10_000)).toBe(false);
    expect(await c.exists(key(gone))).toBe(0);
    // a mutex string with this very token is not a holder set
    await c.set(key(str), a, 'PX', 10_000);
    expect(await extend(c, [str], a, 60_000)).toBe(false);
    expect(await c.pttl(key(str))).toBeLessThanOrEqual(10_000);
  });

  it('is all-or-nothing over several resources', async () => {
    const [x, y] = [uniqueResource('x'), uniqueResource('y')];
    const a = tok('a');
    expect((await reader(c, [x], a, 1_000)).status).toBe('granted');
    expect(await extend(c, [x, y], a, 30_000)).toBe(false);
    expect(await c.pttl(key(x))).toBeLessThanOrEqual(1_000);
  });
});

describe('release', () => {
  it('removes only this token, deletes the key with the last holder, publishes', async () => {
    const r = uniqueResource('rel');
    const [a, b] = [tok('a'), tok('b')];
    expect((await semaphore(c, [r], 3, a)).status).toBe('granted');
    expect((await semaphore(c, [r], 3, b, 5_000)).status).toBe('granted');
    const messages: string[] = [];
    const onMessage = (channel: string, message: string): void => {
      if (channel === key(r)) messages.push(message);
    };
    sub.on('message', onMessage);
    try {
      await sub.subscribe(key(r));
      expect(await release(c, [r], tok('stranger'))).toBe(0);
      expect(await release(c, [r], a, false)).toBe(1); // removed, not announced
      expect(await c.zrange(key(r), '0', '-1')).toEqual([b, '#semaphore:3']);
      expect(await c.pttl(key(r))).toBeLessThanOrEqual(5_000); // a's later expiry is gone
      expect(await release(c, [r], b)).toBe(1);
      expect(await c.exists(key(r))).toBe(0);
      await waitUntil(() => messages.length > 0);
      expect(messages).toEqual([b]); // the unannounced release of a published nothing
    } finally {
      sub.off('message', onMessage);
      await sub.unsubscribe(key(r));
    }
  });

  it('leaves the writer string and other kinds alone, and does not count an expired membership', async () => {
    const [w, r] = [uniqueResource('w'), uniqueResource('r')];
    const token = tok('t');
    expect((await writer(c, [w], token, 0)).status).toBe('granted');
    expect(await release(c, [w], token)).toBe(0);
    expect(await c.get(key(w))).toBe(token);
    // the long-lived reader first: an acquire prunes expired memberships, so a later grant (more
    // than 30 ms after token's on a loaded machine) would remove token's entry before the release
    expect((await reader(c, [r], tok('other'))).status).toBe('granted');
    expect((await reader(c, [r], token, 30)).status).toBe('granted');
    await waitUntil(async () => (await inspect(c, r)).holders === 1);
    expect(await c.zscore(key(r), token)).not.toBeNull(); // expired, but still in the set
    expect(await release(c, [r], token)).toBe(0); // it was lost already
    expect(await c.zscore(key(r), token)).toBeNull(); // but it is cleaned up
  });
});

describe('inspect (read-only)', () => {
  it('reports every kind without changing any key', async () => {
    const [none, mutex, shared, sem] = ['none', 'mutex', 'shared', 'sem'].map(uniqueResource);
    await c.set(key(mutex), tok('m'), 'PX', 10_000);
    expect((await reader(c, [shared], tok('r1'), 10_000)).status).toBe('granted');
    expect((await reader(c, [shared], tok('r2'), 20_000)).status).toBe('granted');
    expect((await writer(c, [shared], tok('w'), 5_000)).status).toBe('held'); // raises the flag
    expect((await semaphore(c, [sem], 3, tok('s'), 10_000)).status).toBe('granted');
    // an expired member that no script has pruned yet
    await c.zadd(key(sem), String(Date.now() - 60_000), tok('expired'));
    const keys = [none, mutex, shared, sem].flatMap((r) => [key(r), wkey(r)]);
    const before = await snapshot(c, keys);

    expect(await inspect(c, none)).toEqual({
      found: { kind: 'none' },
      holders: 0,
      ttl: 0,
      waiting: 0,
    });
    const m = await inspect(c, mutex);
    expect(m).toMatchObject({ found: { kind: 'mutex' }, holders: 1, waiting: 0 });
    expect(m.ttl).toBeGreaterThan(9_000);
    const s = await inspect(c, shared);
    expect(s).toMatchObject({ found: { kind: 'shared' }, holders: 2 });
    expect(s.ttl).toBeGreaterThan(19_000); // the last of the readers
    expect(s.waiting).toBeGreaterThan(4_000);
    const sm = await inspect(c, sem);
    expect(sm).toMatchObject({ found: { kind: 'semaphore', limit: 3 }, holders: 1 });

    expect(await snapshot(c, keys)).toEqual(before);
    expect(await c.zcard(key(sem))).toBe(3); // the expired member is still there
  });
});

describe('on a Redis Cluster master', () => {
  let cluster: LocalCluster;
  let cc: Cluster;

  beforeAll(async () => {
    cluster = await LocalCluster.start(3);
    cc = new Cluster(cluster.seeds, { redisOptions: { maxRetriesPerRequest: 1 } });
    cc.on('error', () => undefined);
    await waitUntil(() => cc.status === 'ready', 20_000);
  });

  afterAll(async () => {
    await cc?.quit().catch(() => undefined);
    await cluster?.stop();
  });

  it('runs every kind script for a resource with its flag and fencing keys: no CROSSSLOT', async () => {
    const id = randomBytes(4).toString('hex');
    // braces in the resource take the hashed-tag path of base/keys.ts. (No boot marker: it is in no
    // resource's slot, and the engine does not check it on Cluster masters.)
    for (const r of [`plain:${id}`, `}odd{${id}`]) {
      const [s, t] = [tok('s'), tok('t')];
      const { keys } = acquireLayout([r], { token: s, ttl: 1, fencing: true }, true);
      expect(new Set(keys.map(keySlot)).size).toBe(1);
      const sem = await semaphore(cc, [r], 2, s, 10_000, true);
      expect(sem.status).toBe('granted');
      expect(await extend(cc, [r], s, 5_000)).toBe(true);
      expect(await inspect(cc, r)).toMatchObject({
        found: { kind: 'semaphore', limit: 2 },
        holders: 1,
      });
      expect(await release(cc, [r], s)).toBe(1);
      expect((await reader(cc, [r], t, 10_000, true)).status).toBe('granted');
      expect((await writer(cc, [r], tok('w'), 5_000, 10_000, true)).status).toBe('held');
      expect((await inspect(cc, r)).waiting).toBeGreaterThan(0);
      expect(await release(cc, [r], t)).toBe(1);
      expect((await writer(cc, [r], tok('w'), 5_000, 10_000, true)).status).toBe('granted');
    }
  });

  it('would see CROSSSLOT if the keys were in different slots (the check can fail)', async () => {
    const [a, b] = [uniqueResource('a'), uniqueResource('b')];
    expect(keySlot(key(a))).not.toBe(keySlot(key(b)));
    await expect(reader(cc, [a, b], tok('r'))).rejects.toThrow(/CROSSSLOT/);
  });
});
