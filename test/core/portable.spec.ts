/**
 * Portable locks against real redis-server masters: `lock.toJSON()` /
 * `JSON.stringify(lock)` and `restore(data)` in another engine (another process) over the same
 * masters and key prefix; conservative validity; expired locks never re-created; typed errors.
 */
import {
  InvalidArgumentError,
  InvalidLockDataError,
  LockLostError,
} from '../../lib/core/base/errors';
import { Lock } from '../../lib/core/lock/lock';
import { driftFor } from '../../lib/core/base/clock';
import { Redlock } from '../../lib/core/redlock';
import { InMemoryRedlock } from '../../lib/testing/in-memory-redlock';
import { useMasters } from '../harness/engines';
import { recordingLogger, uniqueResource, valuesOn, waitUntil } from '../harness/util';

const suite = useMasters(3, { logger: recordingLogger() });
const engine = (...args: Parameters<typeof suite.engine>): Redlock => suite.engine(...args);

const pttls = (key: string): Promise<number[]> => Promise.all(suite.probe.map((c) => c.pttl(key)));
const allHold = async (rl: Redlock, r: string, token: string): Promise<boolean> =>
  (await valuesOn(suite.probe, rl.keyOf(r))).every((v) => v === token);

describe('portable locks', () => {
  it('round-trips through JSON into another engine that extends and releases it', async () => {
    const a = engine();
    const b = engine(); // "another process" over the same masters
    const r = uniqueResource('portable');
    const lock = await a.acquire(r, { ttl: 4000 });
    await waitUntil(() => allHold(a, r, lock.value));
    const text = JSON.stringify(lock);
    const data = JSON.parse(text) as Record<string, unknown>;
    expect(data).toEqual({
      version: 1,
      kind: 'mutex',
      keyPrefix: 'lock:',
      resources: [r],
      token: lock.value,
      ttl: 4000,
      acquiredAt: expect.any(Number),
      expiresAt: expect.any(Number),
      fencingTokens: { [r]: lock.fencingToken },
    });
    expect(data.expiresAt).toBe(lock.expiresAt + driftFor(4000, 0.01));
    const moved = b.restore(JSON.parse(text));
    expect(moved).toBeInstanceOf(Lock);
    expect(moved).not.toBe(lock);
    expect(moved.resources).toEqual([r]);
    expect(moved.value).toBe(lock.value);
    expect(moved.fencingToken).toBe(lock.fencingToken);
    expect(moved.isValid).toBe(true);
    // Conservative: never more validity than the original has, up to how far the wall clock
    // (what a restore must use) and the monotonic clock (the original's) of one process drift
    // apart — a few ms under load on a slewed clock (CI once saw 6 ms). 25 ms stays well inside
    // the drift the restore subtracts (42 ms for this ttl), which covers exactly that.
    expect(moved.remainingValidity).toBeLessThanOrEqual(lock.remainingValidity + 25);
    expect(b.heldLocks).toContain(moved);
    // Bound to b: a is refused (typed), and b's lock is b's.
    await expect(a.extend(moved)).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(b.release(lock)).rejects.toBeInstanceOf(InvalidArgumentError);
    // Extend from b: the keys get the new ttl.
    await moved.extend(20_000);
    await waitUntil(async () => (await pttls(a.keyOf(r))).every((t) => t > 10_000));
    expect(moved.remainingValidity).toBeGreaterThan(10_000);
    // Release from b: the keys are gone; a's release then finds nothing of its own.
    const released = await moved.release();
    expect(released.deleted).toBeGreaterThanOrEqual(2);
    await waitUntil(async () => (await valuesOn(suite.probe, a.keyOf(r))).every((v) => v === null));
    expect((await lock.release()).deleted).toBe(0);
  });

  it.each([
    ['a shared lock', { shared: true }, { kind: 'shared' }],
    ['a semaphore slot', { limit: 3 }, { kind: 'semaphore', limit: 3 }],
  ] as const)('%s keeps its kind across processes', async (_, options, form) => {
    const a = engine();
    const b = engine();
    const r = uniqueResource('portable-kind');
    const lock = await a.acquire(r, { ttl: 4000, ...options });
    const data = JSON.parse(JSON.stringify(lock)) as Record<string, unknown>;
    expect(data).toMatchObject(form);
    const moved = b.restore(data);
    expect(moved.kind).toBe(lock.kind);
    expect(moved.limit).toBe(lock.limit);
    await moved.extend(20_000); // the holders' compare-and-pexpire of this membership
    expect((await b.inspect(r)).ttl).toBeGreaterThan(10_000);
    expect((await moved.release()).deleted).toBeGreaterThanOrEqual(2);
    expect(await b.inspect(r)).toMatchObject({ locked: false, holders: 0 });
  });

  it('keeps the fencing tokens of any resource name, "__proto__" included, and lockAtLeastFor', async () => {
    const a = engine();
    const b = engine();
    const rs = ['__proto__', uniqueResource('portable-multi')].sort();
    const lock = await a.acquire(rs, { lockAtLeastFor: 3000 });
    const moved = b.restore(JSON.parse(JSON.stringify(lock)));
    for (const r of rs) expect(moved.fencingTokens[r]).toBe(lock.fencingTokens[r]);
    expect(Object.getPrototypeOf(moved.fencingTokens)).toBeNull();
    await moved.release(); // before lockAtLeastFor: kept, not deleted
    for (const r of rs) {
      expect(await b.isLocked(r)).toBe(true);
      expect((await pttls(b.keyOf(r))).every((t) => t > 0 && t <= 3000)).toBe(true);
    }
    await Promise.all(suite.probe.flatMap((c) => rs.map((r) => c.del(b.keyOf(r)))));
  });

  it('restored validity is conservative: wall-clock expiry − now − drift, at most a fresh ttl', async () => {
    const a = engine();
    const b = engine();
    const r = uniqueResource('portable-validity');
    const lock = await a.acquire(r, { ttl: 10_000 });
    const data = lock.toJSON();
    const drift = driftFor(10_000, 0.01);
    const soon = b.restore({ ...data, expiresAt: Date.now() + 5000 });
    expect(soon.remainingValidity).toBeLessThanOrEqual(5000 - drift);
    expect(soon.remainingValidity).toBeGreaterThan(5000 - drift - 1000);
    // A clock far ahead (or a forged expiry) never gives more than a fresh grant of the ttl.
    const far = b.restore({ ...data, expiresAt: Date.now() + 3_600_000 });
    expect(far.remainingValidity).toBeLessThanOrEqual(10_000 - drift);
    await lock.release();
  });

  it('an expired restored lock extends to LockLostError without touching Redis (repairOnExtend on)', async () => {
    const a = engine();
    const b = engine({ repairOnExtend: true });
    const r = uniqueResource('portable-expired');
    const lock = await a.acquire(r, { ttl: 10_000 });
    await waitUntil(() => allHold(a, r, lock.value));
    // Its keys went missing on two masters (a repairing extension would put them back there).
    await suite.probe[0].del(a.keyOf(r));
    await suite.probe[1].del(a.keyOf(r));
    const before = await pttls(a.keyOf(r));
    const data = { ...lock.toJSON(), expiresAt: Date.now() - 1 };
    const moved = b.restore(data);
    expect(moved.isValid).toBe(false);
    expect(moved.signal.aborted).toBe(true);
    expect(moved.signal.reason).toBeInstanceOf(LockLostError);
    await expect(moved.extend()).rejects.toBeInstanceOf(LockLostError);
    await expect(b.extend(moved, 5000)).rejects.toBeInstanceOf(LockLostError);
    // Not re-created where missing, not refreshed where present.
    expect(await valuesOn(suite.probe, a.keyOf(r))).toEqual([null, null, lock.value]);
    const after = await pttls(a.keyOf(r));
    expect(after[2]).toBeLessThanOrEqual(before[2]);
    expect(b.heldLocks).not.toContain(moved);
    // Release is harmless: it deletes only what is still ours.
    await moved.release();
    await waitUntil(async () => (await valuesOn(suite.probe, a.keyOf(r))).every((v) => v === null));
    await lock.release();
  });

  it('a restored lock aborts its signal when it is found lost', async () => {
    const a = engine();
    const b = engine();
    const r = uniqueResource('portable-lost');
    const lock = await a.acquire(r, { ttl: 10_000 });
    const moved = b.restore(lock.toJSON());
    const signal = moved.signal;
    expect(signal.aborted).toBe(false);
    await Promise.all(suite.probe.map((c) => c.del(a.keyOf(r))));
    await expect(moved.extend()).rejects.toBeInstanceOf(LockLostError);
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBeInstanceOf(LockLostError);
  });

  it('rejects anything that is not a valid serialized lock with InvalidLockDataError', async () => {
    const a = engine();
    const b = engine();
    const r = uniqueResource('portable-bad');
    const lock = await a.acquire(r);
    const good = lock.toJSON();
    const cases: [string, unknown, string][] = [
      ['null', null, 'data'],
      ['a string', JSON.stringify(good), 'data'],
      ['an array', [good], 'data'],
      ['a Lock', lock, 'data'],
      ['unknown field', { ...good, extra: 1 }, 'data.extra'],
      ['missing version', { ...good, version: undefined }, 'data.version'],
      ['unknown version', { ...good, version: 2 }, 'data.version'],
      ['version as string', { ...good, version: '1' }, 'data.version'],
      ['unknown kind', { ...good, kind: 'shared-ish' }, 'data.kind'],
      ['missing kind', { ...good, kind: undefined }, 'data.kind'],
      ['semaphore without limit', { ...good, kind: 'semaphore' }, 'data.limit'],
      ['semaphore limit 0', { ...good, kind: 'semaphore', limit: 0 }, 'data.limit'],
      ['limit on a plain lock', { ...good, limit: 2 }, 'data.limit'],
      ['other key prefix', { ...good, keyPrefix: 'other:' }, 'data.keyPrefix'],
      ['missing resources', { ...good, resources: undefined }, 'data.resources'],
      ['empty resources', { ...good, resources: [] }, 'data.resources'],
      ['resource not a string', { ...good, resources: [42] }, 'data.resources[0]'],
      ['empty resource', { ...good, resources: [''] }, 'data.resources[0]'],
      ['lone surrogate', { ...good, resources: ['\uD800'] }, 'data.resources[0]'],
      [
        'unsorted resources',
        { ...good, resources: ['b', 'a'], fencingTokens: {} },
        'data.resources',
      ],
      [
        'duplicate resources',
        { ...good, resources: ['a', 'a'], fencingTokens: {} },
        'data.resources',
      ],
      ['sparse resources', { ...good, resources: new Array(1) }, 'data.resources[0]'],
      ['missing token', { ...good, token: undefined }, 'data.token'],
      ['short token', { ...good, token: 'abc' }, 'data.token'],
      ['token with bad characters', { ...good, token: `#${good.token.slice(1)}` }, 'data.token'],
      ['token not a string', { ...good, token: 12345 }, 'data.token'],
      ['ttl as string', { ...good, ttl: '10000' }, 'data.ttl'],
      ['ttl beyond maxTtl', { ...good, ttl: 60_001 }, 'data.ttl'],
      ['ttl fractional', { ...good, ttl: 100.5 }, 'data.ttl'],
      ['missing acquiredAt', { ...good, acquiredAt: undefined }, 'data.acquiredAt'],
      ['expiresAt NaN', { ...good, expiresAt: NaN }, 'data.expiresAt'],
      ['expiresAt negative', { ...good, expiresAt: -1 }, 'data.expiresAt'],
      [
        'expiresAt before acquiredAt',
        { ...good, expiresAt: good.acquiredAt - 1 },
        'data.expiresAt',
      ],
      ['fencingTokens missing', { ...good, fencingTokens: undefined }, 'data.fencingTokens'],
      ['fencingTokens array', { ...good, fencingTokens: [1] }, 'data.fencingTokens'],
      [
        'fencing token of another resource',
        { ...good, fencingTokens: { other: 1 } },
        'data.fencingTokens',
      ],
      [
        'fencing token unsafe',
        { ...good, fencingTokens: { [r]: 2 ** 53 } },
        `data.fencingTokens[${JSON.stringify(r)}]`,
      ],
      [
        'fencing token zero',
        { ...good, fencingTokens: { [r]: 0 } },
        `data.fencingTokens[${JSON.stringify(r)}]`,
      ],
      [
        'fencing token string',
        { ...good, fencingTokens: { [r]: '7' } },
        `data.fencingTokens[${JSON.stringify(r)}]`,
      ],
      ['lockAtLeastFor negative', { ...good, lockAtLeastFor: -1 }, 'data.lockAtLeastFor'],
      ['lockAtLeastFor beyond maxTtl', { ...good, lockAtLeastFor: 60_001 }, 'data.lockAtLeastFor'],
    ];
    const before = b.heldLocks.length;
    for (const [label, data, field] of cases) {
      let err: unknown;
      try {
        b.restore(data);
      } catch (e) {
        err = e;
      }
      expect([label, err]).toEqual([label, expect.any(InvalidLockDataError)]);
      expect([label, (err as InvalidLockDataError).field]).toEqual([label, field]);
      expect(err).toBeInstanceOf(InvalidArgumentError);
      expect((err as InvalidLockDataError).code).toBe('INVALID_ARGUMENT');
      expect((err as Error).name).toBe('InvalidLockDataError');
    }
    expect(b.heldLocks.length).toBe(before);
    // Unfenced locks (fencing off) round-trip with no tokens.
    const unfenced = engine({ fencing: false });
    const plain = await unfenced.acquire(uniqueResource('portable-unfenced'));
    const back = b.restore(plain.toJSON());
    expect(back.fencingToken).toBeUndefined();
    await back.release();
    await lock.release();
  });
});

describe('portable locks on the in-memory engine', () => {
  it('restores in the same engine; another in-memory engine cannot reach its keys', async () => {
    const rl = new InMemoryRedlock();
    const other = new InMemoryRedlock();
    try {
      const lock = await rl.acquire('job');
      const data = JSON.parse(JSON.stringify(lock)) as unknown;
      const moved = rl.restore(data);
      expect(moved.value).toBe(lock.value);
      await moved.extend(5000);
      const stranger = other.restore(data);
      await expect(stranger.extend()).rejects.toBeInstanceOf(LockLostError);
      await moved.release();
      expect(rl.isHeld('job')).toBe(false);
      expect(() => rl.restore({ ...lock.toJSON(), token: 'x' })).toThrow(InvalidLockDataError);
    } finally {
      await rl.close();
      await other.close();
    }
  });
});
