/**
 * What a release reports (docs/REDLOCK.md, "N masters", step 5): `complete` says whether every
 * master deleted its key (or had nothing of ours), once every master answered or its request
 * timed out — on three healthy masters every release is complete, and nothing is logged; with a
 * master paused, the release still resolves (bounded by the request timeout), reports the
 * master that did not answer, and `using()` logs it once. With `wait: 'quorum'` a release resolves
 * once a quorum deleted the keys: a paused master costs no wait, its vote is `pending`, and its
 * delete lands when it answers again.
 */
import { jest } from '@jest/globals';
import type { ReleasedEvent } from '../../lib/core/lock/events';
import { useMasters } from '../harness/engines';
import { InvalidArgumentError } from '../../lib/core/base/errors';
import { lockKey } from '../../lib/core/base/keys';
import { uniqueResource, valuesOn, waitUntil } from '../harness/util';

// Engines whose masters were checked already: a fresh engine's first acquire goes only to the
// masters whose checks answered (redis/masters/master-checks.ts), and a lock released at once
// then finds nothing of its own on the others (`held`, not `ok`).
const suite = useMasters(3, { keyPrefix: 'rel:' });

describe('release results', () => {
  it('on healthy masters every release is complete, deleted everywhere, and nothing is logged', async () => {
    const debug = jest.fn();
    const rl = await suite.checkedEngine({ logger: { warn: () => undefined, debug } });
    const events: ReleasedEvent[] = [];
    rl.observe((e) => {
      if (e.type === 'released') events.push(e);
    });
    for (let i = 0; i < 20; i++) {
      const lock = await rl.acquire(uniqueResource('healthy'));
      const result = await lock.release();
      expect(result).toMatchObject({ deleted: 3, complete: true });
      expect(result.votes.map((v) => v.outcome)).toEqual(['ok', 'ok', 'ok']);
      await rl.using(uniqueResource('healthy-using'), () => undefined);
    }
    expect(events).toHaveLength(40);
    expect(events.every((e) => e.result.complete && e.result.deleted === 3)).toBe(true);
    expect(debug).not.toHaveBeenCalled();
  });

  it('a master that does not answer makes the release incomplete, reported after its timeout', async () => {
    const debug = jest.fn();
    const rl = await suite.checkedEngine({
      requestTimeout: 200,
      logger: { warn: () => undefined, debug },
    });
    const r = uniqueResource('paused');
    const lock = await rl.acquire(r, { ttl: 5_000 });
    const paused = suite.masters.masters[2];
    paused.pause();
    try {
      const result = await lock.release();
      expect(result.deleted).toBe(2);
      expect(result.complete).toBe(false);
      expect(result.votes[2].outcome).toBe('timeout');
      await rl.using(uniqueResource('paused-using'), () => undefined, { ttl: 5_000 });
      expect(debug).toHaveBeenCalledTimes(1);
      expect(String(debug.mock.calls[0][0])).toMatch(/incomplete/);
    } finally {
      paused.resume();
    }
  });

  it("with wait: 'quorum' a release resolves at a quorum; a paused master's delete lands when it answers", async () => {
    // A long request timeout: waiting for the paused master, the vote would be a `timeout`.
    const rl = await suite.checkedEngine({ ttl: 50_000, requestTimeout: 45_000 });
    const events: ReleasedEvent[] = [];
    rl.observe((e) => {
      if (e.type === 'released') events.push(e);
    });
    const r = uniqueResource('quorum');
    const key = lockKey('rel:', r);
    const lock = await rl.acquire(r);
    expect((await valuesOn(suite.probe, key)).every((v) => v !== null)).toBe(true);
    const paused = suite.masters.masters[2];
    paused.pause();
    try {
      const result = await lock.release({ wait: 'quorum' });
      expect(result.deleted).toBe(2);
      expect(result.complete).toBe(false);
      expect(result.votes.map((v) => v.outcome)).toEqual(['ok', 'ok', 'pending']);
      expect(lock.released).toBe(true);
      expect(events.map((e) => e.result)).toEqual([result]);
      expect(await valuesOn(suite.probe.slice(0, 2), key)).toEqual([null, null]);
    } finally {
      paused.resume();
    }
    // The delete was sent with the others: it lands once the master runs again.
    await waitUntil(async () => (await suite.probe[2].exists(key)) === 0);
  });

  it("with wait: 'quorum' on healthy masters every key is deleted; wait: 'all' waits for every master", async () => {
    const rl = await suite.checkedEngine();
    const r = uniqueResource('quorum-healthy');
    const key = lockKey('rel:', r);
    const lock = await rl.acquire(r);
    const result = await lock.release({ wait: 'quorum' });
    expect(result.deleted).toBeGreaterThanOrEqual(2);
    await waitUntil(async () => (await valuesOn(suite.probe, key)).every((v) => v === null));
    const other = await rl.acquire(r);
    expect(await other.release({ wait: 'all' })).toMatchObject({ deleted: 3, complete: true });
  });

  it('refuses an unknown wait with a typed error and keeps the lock', async () => {
    const rl = await suite.checkedEngine();
    const lock = await rl.acquire(uniqueResource('quorum-bad'));
    await expect(lock.release({ wait: 'most' as never })).rejects.toThrow(InvalidArgumentError);
    await expect(lock.release({ wait: 'most' as never })).rejects.toThrow(/'all' or 'quorum'/);
    expect(lock.released).toBe(false);
    expect(lock.isValid).toBe(true);
    expect((await lock.release()).complete).toBe(true);
  });
});
