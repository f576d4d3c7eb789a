/**
 * Decoders of the lock-kind script replies (lib/core/redis/kinds/kind.ts): every shape the
 * scripts produce is decoded, anything else is rejected with a ReplyFormatError naming the script.
 */
import {
  decodeInspect,
  decodeKindAcquire,
  decodeKindExtend,
  decodeKindRelease,
  markerAgeOf,
  ReplyFormatError,
} from '../../lib/core/redis/kinds/kind';

describe('decodeKindAcquire', () => {
  it('decodes granted, held and mismatch replies', () => {
    expect(decodeKindAcquire([1, -1], 0)).toEqual({
      status: 'granted',
      markerAge: -1,
      fencing: [],
    });
    expect(decodeKindAcquire([1, 5000, 7, 9], 2)).toEqual({
      status: 'granted',
      markerAge: 5000,
      fencing: [7, 9],
    });
    // A data set younger than a second answers 0 for its counters (redis/scripts/fencing.ts).
    expect(decodeKindAcquire([1, 50, 0], 1)).toEqual({
      status: 'granted',
      markerAge: 50,
      fencing: [0],
    });
    expect(decodeKindAcquire([0, 12, 300], 0)).toEqual({
      status: 'held',
      markerAge: 12,
      holderTtl: 300,
    });
    expect(decodeKindAcquire([-1, -1, 40, 'semaphore', 3], 1)).toEqual({
      status: 'mismatch',
      markerAge: -1,
      holderTtl: 40,
      found: { kind: 'semaphore', limit: 3 },
    });
    expect(decodeKindAcquire([-1, -1, 0, 'mutex', 0], 0)).toMatchObject({
      found: { kind: 'mutex' },
    });
    expect(decodeKindAcquire([-1, -1, 0, 'shared', 0], 0)).toMatchObject({
      found: { kind: 'shared' },
    });
    expect(decodeKindAcquire([-1, -1, 0, 'foreign:hash', 0], 0)).toMatchObject({
      found: { kind: 'foreign', redisType: 'hash' },
    });
  });

  it('decodes every boot marker age: unchecked (-1), known old (-2), checked (≥ 0, or a clock set back)', () => {
    expect(decodeKindAcquire([-1, -2, 4997, 'semaphore', 3], 0)).toEqual({
      status: 'mismatch',
      markerAge: -2,
      holderTtl: 4997,
      found: { kind: 'semaphore', limit: 3 },
    });
    expect(decodeKindAcquire([1, -2, 7], 1)).toMatchObject({ status: 'granted', markerAge: -2 });
    expect(decodeKindAcquire([0, -2, 5, 'tok'], 0)).toMatchObject({ status: 'held' });
    expect(decodeKindAcquire([0, -30, 5], 0)).toMatchObject({ markerAge: -30 });
    expect(markerAgeOf(-1)).toBeUndefined();
    expect(markerAgeOf(-2)).toBeUndefined();
    expect(markerAgeOf(-30)).toBe(0); // a marker born after the server's clock: young
    expect(markerAgeOf(0)).toBe(0);
    expect(markerAgeOf(61_000)).toBe(61_000);
  });

  it.each([
    [null, 0],
    ['OK', 0],
    [[1], 0],
    [[1, -1], 1], // a fencing counter is missing
    [[1, -1, 5], 0], // an unexpected counter
    [[1, -1, -1], 1], // counters are not negative (0: a data set too young to start one)
    [[1, 1.5], 0],
    [[0, -1], 0],
    [[0, -1, -5], 0],
    [[0, -1, 5, 6], 0],
    [[2, -1, 5], 0],
    [[-1, -1, 5], 0],
    [[-1, -1, 5, 'semaphore', 0], 0],
    [[-1, -1, 5, 'mutex', 2], 0],
    [[-1, -1, 5, 'none', 0], 0],
    [[-1, -1, 5, 'foreign:', 0], 0],
    [[-1, -1, 5, 'zset', 0], 0],
    [['1', '-1'], 0],
  ])('rejects %j (fencing counters %i)', (reply, counters) => {
    expect(() => decodeKindAcquire(reply, counters)).toThrow(ReplyFormatError);
    expect(() => decodeKindAcquire(reply, counters)).toThrow(
      /Malformed reply of the acquire script/,
    );
  });

  it('shows at most 200 characters of a malformed reply', () => {
    const reply = [7, 'x'.repeat(1000)];
    expect(() => decodeKindAcquire(reply, 0)).toThrow(
      /^Malformed reply of the acquire script: .{200}…$/,
    );
  });
});

describe('decodeKindExtend / decodeKindRelease', () => {
  it('decodes 1/0 and counts', () => {
    expect(decodeKindExtend(1)).toBe(true);
    expect(decodeKindExtend(0)).toBe(false);
    expect(decodeKindRelease(0, 2)).toBe(0);
    expect(decodeKindRelease(2, 2)).toBe(2);
  });

  it('rejects anything else', () => {
    for (const r of [2, -1, '1', null, [1]]) expect(() => decodeKindExtend(r)).toThrow(/extend/);
    for (const r of [3, -1, 1.5, '1', null])
      expect(() => decodeKindRelease(r, 2)).toThrow(/release/);
  });
});

describe('decodeInspect', () => {
  it('decodes every kind', () => {
    expect(decodeInspect(['none', 0, 0, 0, 0])).toEqual({
      found: { kind: 'none' },
      holders: 0,
      ttl: 0,
      waiting: 0,
    });
    expect(decodeInspect(['mutex', 1, 900, 0, 0])).toMatchObject({ found: { kind: 'mutex' } });
    expect(decodeInspect(['mutex', 1, -1, 0, 0]).ttl).toBe(-1);
    expect(decodeInspect(['shared', 4, 900, 0, 120])).toEqual({
      found: { kind: 'shared' },
      holders: 4,
      ttl: 900,
      waiting: 120,
    });
    expect(decodeInspect(['semaphore', 0, 0, 3, 0]).found).toEqual({ kind: 'semaphore', limit: 3 });
    expect(decodeInspect(['foreign:list', 0, 0, 0, 0]).found).toEqual({
      kind: 'foreign',
      redisType: 'list',
    });
  });

  it.each([
    [null],
    [['none', 0, 0, 0]],
    [['none', 1, 0, 0, 0]], // holders on a free key
    [['mutex', 2, 10, 0, 0]],
    [['shared', 2, 0, 0, 0]], // holders but no ttl
    [['shared', 0, 10, 0, 0]], // ttl but no holders
    [['semaphore', 1, 10, 0, 0]], // a semaphore without limit
    [['shared', 1, 10, 0, -1]],
    [['what', 0, 0, 0, 0]],
  ])('rejects %j', (reply) => {
    expect(() => decodeInspect(reply)).toThrow(/Malformed reply of the inspect script/);
  });
});
