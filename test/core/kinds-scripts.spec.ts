/**
 * The acquire scripts of the lock kinds (lib/core/kinds), run with EVAL against a real
 * redis-server: semaphore limits and expiry pruning, shared readers against the mutex/writer
 * string, kind mismatches, the writer-waiting policy, all-or-nothing over several resources.
 * Extend/release/inspect and Redis Cluster: kinds-holders.spec.ts.
 */
import type { Redis } from 'ioredis';
import { randomBytes } from 'node:crypto';
import { decodeKindAcquire, type KindAcquireReply } from '../../lib/core/redis/kinds/kind';
import { SEMAPHORE_ACQUIRE_SCRIPT } from '../../lib/core/redis/kinds/semaphore-scripts';
import {
  SHARED_ACQUIRE_SCRIPT,
  WRITE_ACQUIRE_SCRIPT,
} from '../../lib/core/redis/kinds/shared-scripts';
import { ACQUIRE_SCRIPT } from '../../lib/core/redis/kinds/mutex';
import { ACQUIRE_AMONG_KINDS_SCRIPT } from '../../lib/core/redis/kinds/mutex-among-kinds';
import { fenceKey } from '../../lib/core/base/keys';
import { type AcquireCall, PREFIX, acquireLayout, key, run, wkey } from '../harness/kind-scripts';
import { useMasters } from '../harness/engines';
import { uniqueResource, waitUntil } from '../harness/util';

const suite = useMasters(1);
let c: Redis;

beforeAll(() => {
  [c] = suite.clients;
});

const tok = (label: string): string => `${label}-${randomBytes(6).toString('base64url')}`;

function fencesOf(resources: string[], call: AcquireCall): number {
  return call.fencing ? resources.length : 0;
}

async function semaphore(
  resources: string[],
  limit: number,
  call: AcquireCall,
): Promise<KindAcquireReply> {
  const { keys, args } = acquireLayout(resources, call, false);
  const reply = await run(c, SEMAPHORE_ACQUIRE_SCRIPT, keys, [...args, String(limit)]);
  return decodeKindAcquire(reply, fencesOf(resources, call));
}

async function reader(resources: string[], call: AcquireCall): Promise<KindAcquireReply> {
  const { keys, args } = acquireLayout(resources, call, true);
  return decodeKindAcquire(
    await run(c, SHARED_ACQUIRE_SCRIPT, keys, args),
    fencesOf(resources, call),
  );
}

/** A writer's attempt; `retry`: not its first (its grant takes the flags down: ARGV[8]). */
async function writer(
  resources: string[],
  call: AcquireCall,
  waitTtl: number,
  retry = false,
): Promise<KindAcquireReply> {
  const { keys, args } = acquireLayout(resources, call, true);
  const reply = await run(c, WRITE_ACQUIRE_SCRIPT, keys, [
    ...args,
    String(waitTtl),
    retry ? '1' : '0',
  ]);
  return decodeKindAcquire(reply, fencesOf(resources, call));
}

const members = (r: string): Promise<string[]> => c.zrange(key(r), '0', '-1');

describe('counting semaphore', () => {
  it('admits at most `limit` holders, with fencing counters and the boot marker age', async () => {
    const r = uniqueResource('sem');
    const marker = `kinds:boot:${r}`;
    const call = (t: string, ttl = 10_000): AcquireCall => ({
      token: t,
      ttl,
      fencing: true,
      marker,
    });
    // A data set born a minute ago: its counters start (a younger one answers 0 for them:
    // redis/scripts/fencing.ts YOUNG_DATA_SET_MS; below).
    await c.set(marker, String(Date.now() - 60_000));
    const a = await semaphore([r], 2, call(tok('a'), 5_000));
    const b = await semaphore([r], 2, call(tok('b')));
    expect(a).toMatchObject({ status: 'granted', markerAge: expect.any(Number) });
    expect(b.status).toBe('granted');
    if (a.status !== 'granted' || b.status !== 'granted') throw new Error('not granted');
    expect(b.fencing[0]).toBe(a.fencing[0] + 1);
    const c3 = await semaphore([r], 2, call(tok('c')));
    expect(c3.status).toBe('held');
    // the earliest holder (a, 5 s) frees the next slot
    if (c3.status === 'held') {
      expect(c3.holderTtl).toBeGreaterThan(4_000);
      expect(c3.holderTtl).toBeLessThanOrEqual(5_000);
    }
    expect(await c.zcard(key(r))).toBe(3); // two holders + the kind marker
    expect(await c.pttl(key(r))).toBeGreaterThan(9_000); // the latest expiry
    // A data set younger than a second (a new marker) starts no counter: 0.
    const young = uniqueResource('sem-young');
    const y = await semaphore([young], 2, { ...call(tok('y')), marker: `kinds:boot:${young}` });
    expect(y).toMatchObject({ status: 'granted', fencing: [0] });
  });

  it('prunes expired holders with the server clock, so their slots come back', async () => {
    const r = uniqueResource('sem-expiry');
    const short = tok('short');
    expect((await semaphore([r], 2, { token: short, ttl: 1000 })).status).toBe('granted');
    expect((await semaphore([r], 2, { token: tok('long'), ttl: 10_000 })).status).toBe('granted');
    const late = tok('late');
    expect((await semaphore([r], 2, { token: late, ttl: 10_000 })).status).toBe('held');
    await waitUntil(
      async () => (await semaphore([r], 2, { token: late, ttl: 10_000 })).status === 'granted',
    );
    const now = await members(r);
    expect(now).toContain(late);
    expect(now).not.toContain(short);
    expect(now).toHaveLength(3);
  });

  it('goes away with its last holder: the key TTL is the latest expiry', async () => {
    const r = uniqueResource('sem-ttl');
    const [a, b] = [tok('a'), tok('b')];
    expect((await semaphore([r], 3, { token: a, ttl: 1000 })).status).toBe('granted');
    expect((await semaphore([r], 3, { token: b, ttl: 1500 })).status).toBe('granted');
    // Absolute expiry times (server ms), not PTTL: `PTTL > 1000` right after b's 1500 ms grant
    // failed whenever the machine stalled for 500 ms in between.
    const expireAt = Number(await c.call('PEXPIRETIME', key(r)));
    const [aAt, bAt] = [Number(await c.zscore(key(r), a)), Number(await c.zscore(key(r), b))];
    expect(aAt).toBeGreaterThan(0); // a is still a member: the key outlives it
    expect(bAt).toBeGreaterThan(aAt);
    expect(expireAt).toBe(bAt); // the key expires with the latest holder
    expect(await c.pttl(key(r))).toBeLessThanOrEqual(1500);
    await waitUntil(async () => (await c.exists(key(r))) === 0);
  });
});

describe('kind mismatches are a distinct reply, never contention', () => {
  it('semaphore with another limit, a mutex, shared readers or a foreign key', async () => {
    const [lim, mutex, shared, foreign] = ['lim', 'mutex', 'shared', 'foreign'].map(uniqueResource);
    expect((await semaphore([lim], 2, { token: tok('a'), ttl: 10_000 })).status).toBe('granted');
    await c.set(key(mutex), tok('m'), 'PX', 10_000);
    expect((await reader([shared], { token: tok('r'), ttl: 10_000 })).status).toBe('granted');
    await c.hset(key(foreign), 'x', '1');

    expect(await semaphore([lim], 3, { token: tok('b'), ttl: 1000 })).toMatchObject({
      status: 'mismatch',
      found: { kind: 'semaphore', limit: 2 },
    });
    expect(await semaphore([mutex], 2, { token: tok('b'), ttl: 1000 })).toMatchObject({
      status: 'mismatch',
      found: { kind: 'mutex' },
    });
    expect(await semaphore([shared], 2, { token: tok('b'), ttl: 1000 })).toMatchObject({
      status: 'mismatch',
      found: { kind: 'shared' },
    });
    expect(await semaphore([foreign], 2, { token: tok('b'), ttl: 1000 })).toMatchObject({
      status: 'mismatch',
      found: { kind: 'foreign', redisType: 'hash' },
    });
    expect(await reader([lim], { token: tok('b'), ttl: 1000 })).toMatchObject({
      status: 'mismatch',
      found: { kind: 'semaphore', limit: 2 },
    });
    expect(await writer([lim], { token: tok('b'), ttl: 1000 }, 1000)).toMatchObject({
      status: 'mismatch',
      found: { kind: 'semaphore', limit: 2 },
    });
    // nothing was written by the refused calls
    expect(await c.zcard(key(lim))).toBe(2);
    expect(await c.type(key(mutex))).toBe('string');
    expect(await c.zcard(key(shared))).toBe(2);
  });

  it('the holder TTL of a mismatch is the key TTL (a retry-after hint)', async () => {
    const r = uniqueResource('mm-ttl');
    await c.set(key(r), tok('m'), 'PX', 7_000);
    const reply = await semaphore([r], 2, { token: tok('s'), ttl: 1000 });
    expect(reply.status).toBe('mismatch');
    if (reply.status === 'mismatch') expect(reply.holderTtl).toBeGreaterThan(6_000);
  });
});

describe('shared locks: readers against the writer (mutex) string', () => {
  it('a plain mutex SET NX fails while readers hold; ACQUIRE_SCRIPT asks again among the kinds, which refuses', async () => {
    const r = uniqueResource('readers');
    expect((await reader([r], { token: tok('r1'), ttl: 10_000 })).status).toBe('granted');
    expect((await reader([r], { token: tok('r2'), ttl: 10_000 })).status).toBe('granted');
    expect(await c.set(key(r), tok('w'), 'PX', 1000, 'NX')).toBeNull();
    const args = [tok('w'), '1000', '0', '0', '1', '1'];
    expect(await run(c, ACQUIRE_SCRIPT, [key(r)], args)).toEqual([-3, -1]);
    const reply = await run(c, ACQUIRE_AMONG_KINDS_SCRIPT, [key(r)], args);
    expect(decodeKindAcquire(reply, 0).status).toBe('held');
    expect(await c.type(key(r))).toBe('zset');
  });

  it('readers are refused while the writer string exists, and admitted after it is gone', async () => {
    const r = uniqueResource('writer');
    const w = await writer([r], { token: tok('w'), ttl: 10_000 }, 1000);
    expect(w.status).toBe('granted');
    const refused = await reader([r], { token: tok('r'), ttl: 1000 });
    expect(refused.status).toBe('held');
    if (refused.status === 'held') expect(refused.holderTtl).toBeGreaterThan(9_000);
    await c.del(key(r));
    expect((await reader([r], { token: tok('r'), ttl: 1000 })).status).toBe('granted');
  });

  it('a waiting writer holds back new readers until the readers drain', async () => {
    const r = uniqueResource('starve');
    const r1 = tok('r1');
    expect((await reader([r], { token: r1, ttl: 10_000 })).status).toBe('granted');
    const w1 = tok('w1');
    const refused = await writer([r], { token: w1, ttl: 10_000 }, 5_000);
    expect(refused.status).toBe('held');
    expect(await c.get(wkey(r))).toBe(w1);
    // a new reader is refused while the flag lives: it learns how long the flag still lives —
    // until the readers inside expire (10 s) plus the writer's retry interval (5 s)
    const r2 = await reader([r], { token: tok('r2'), ttl: 10_000 });
    expect(r2.status).toBe('held');
    if (r2.status === 'held') {
      expect(r2.holderTtl).toBeGreaterThan(13_000);
      expect(r2.holderTtl).toBeLessThanOrEqual(15_000);
    }
    // the reader inside leaves; the writer's next attempt (a new token) gets in
    await c.zrem(key(r), r1);
    expect((await writer([r], { token: tok('w1b'), ttl: 10_000 }, 5_000, true)).status).toBe(
      'granted',
    );
    // the winner ends the flag where it holds the key (redis/kinds/writer-flag.ts): the key refuses new
    // readers by itself, and its release announcement lets them in
    expect(await c.exists(wkey(r))).toBe(0);
  });

  it('another writer lengthens the flag but never shortens it or takes it over', async () => {
    const r = uniqueResource('flag');
    expect((await reader([r], { token: tok('r'), ttl: 10_000 })).status).toBe('granted');
    const w1 = tok('w1');
    await writer([r], { token: w1, ttl: 1000 }, 3_000);
    await writer([r], { token: tok('w2'), ttl: 1000 }, 500); // shorter: no change
    expect(await c.get(wkey(r))).toBe(w1);
    expect(await c.pttl(wkey(r))).toBeGreaterThan(2_000);
    await writer([r], { token: tok('w3'), ttl: 1000 }, 8_000); // longer: lengthened
    expect(await c.get(wkey(r))).toBe(w1);
    expect(await c.pttl(wkey(r))).toBeGreaterThan(7_000);
  });

  it('the flag expires by itself (the readers’ ttl + waitTtl), then readers get in; waitTtl 0 leaves none', async () => {
    const r = uniqueResource('flag-expiry');
    expect((await reader([r], { token: tok('r1'), ttl: 1_500 })).status).toBe('granted');
    expect((await writer([r], { token: tok('w'), ttl: 1000 }, 100)).status).toBe('held');
    // outlives the reader inside by waitTtl. Absolute expiry times (PEXPIRETIME), which do not
    // shrink while the test runs: `PTTL > 1000` failed after a 600 ms stall since r1's grant.
    const flagAt = Number(await c.call('PEXPIRETIME', wkey(r)));
    const readersAt = Number(await c.call('PEXPIRETIME', key(r)));
    expect(readersAt).toBeGreaterThan(0);
    expect(flagAt).toBeGreaterThanOrEqual(readersAt + 100);
    expect(await c.exists(wkey(r))).toBe(1);
    expect((await reader([r], { token: tok('r2'), ttl: 10_000 })).status).toBe('held');
    await waitUntil(
      async () => (await reader([r], { token: tok('r3'), ttl: 10_000 })).status === 'granted',
    );
    expect(await c.exists(wkey(r))).toBe(0);
    expect((await writer([r], { token: tok('w'), ttl: 1000 }, 0)).status).toBe('held');
    expect(await c.exists(wkey(r))).toBe(0);
  });

  it('a writer refused by another writer raises no flag', async () => {
    const r = uniqueResource('ww');
    expect((await writer([r], { token: tok('w1'), ttl: 10_000 }, 5_000)).status).toBe('granted');
    expect((await writer([r], { token: tok('w2'), ttl: 10_000 }, 5_000)).status).toBe('held');
    expect(await c.exists(wkey(r))).toBe(0);
  });
});

describe('all-or-nothing over several resources', () => {
  it('semaphore: one full resource refuses all, nothing is added elsewhere', async () => {
    const [free, full] = [uniqueResource('free'), uniqueResource('full')];
    expect((await semaphore([full], 1, { token: tok('x'), ttl: 10_000 })).status).toBe('granted');
    // The counter serves every resource of free's slot: unchanged, not necessarily missing.
    const counter = await c.get(fenceKey(PREFIX, free));
    const t = tok('multi');
    expect(
      (await semaphore([free, full], 1, { token: t, ttl: 10_000, fencing: true })).status,
    ).toBe('held');
    expect(await c.exists(key(free))).toBe(0);
    expect(await c.get(fenceKey(PREFIX, free))).toBe(counter); // no counter drawn either
    const other = tok('other');
    const both = await semaphore([free, uniqueResource('f2')], 1, {
      token: other,
      ttl: 10_000,
      fencing: true,
    });
    expect(both.status).toBe('granted');
    if (both.status === 'granted') expect(both.fencing).toHaveLength(2);
  });

  it('readers and writers: a writer-held or reader-held resource refuses the whole call', async () => {
    const [a, b] = [uniqueResource('a'), uniqueResource('b')];
    expect((await writer([b], { token: tok('w'), ttl: 10_000 }, 0)).status).toBe('granted');
    expect((await reader([a, b], { token: tok('r'), ttl: 10_000 })).status).toBe('held');
    expect(await c.exists(key(a))).toBe(0);
    const [x, y] = [uniqueResource('x'), uniqueResource('y')];
    expect((await reader([y], { token: tok('r'), ttl: 10_000 })).status).toBe('granted');
    expect((await writer([x, y], { token: tok('w'), ttl: 10_000 }, 0)).status).toBe('held');
    expect(await c.exists(key(x))).toBe(0);
    // a mismatch anywhere writes nothing, not even a writer-waiting flag
    const [m, s] = [uniqueResource('m'), uniqueResource('s')];
    expect((await reader([m], { token: tok('r'), ttl: 10_000 })).status).toBe('granted');
    expect((await semaphore([s], 2, { token: tok('s'), ttl: 10_000 })).status).toBe('granted');
    expect((await writer([m, s], { token: tok('w'), ttl: 10_000 }, 5_000)).status).toBe('mismatch');
    expect(await c.exists(wkey(m))).toBe(0);
  });

  it('refuses a token that could be taken for the kind marker', async () => {
    const r = uniqueResource('hash-token');
    await expect(semaphore([r], 2, { token: '#semaphore:2', ttl: 1000 })).rejects.toThrow(/token/);
    await expect(reader([r], { token: '#shared', ttl: 1000 })).rejects.toThrow(/token/);
    expect(await c.exists(key(r))).toBe(0);
  });
});
