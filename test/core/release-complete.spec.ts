/**
 * What a release reports (docs/REDLOCK.md, "N masters", step 5): `complete` says whether every
 * master deleted its key (or had nothing of ours), once every master answered or its request
 * timed out — on three healthy masters every release is complete, and nothing is logged; with a
 * master paused, the release still resolves (bounded by the request timeout), reports the
 * master that did not answer, and `using()` logs it once.
 */
import { jest } from '@jest/globals';
import type { ReleasedEvent } from '../../lib/core/lock/events';
import { useMasters } from '../harness/engines';
import { uniqueResource } from '../harness/util';

const suite = useMasters(3, { keyPrefix: 'rel:' });

describe('release results', () => {
  it('on healthy masters every release is complete, deleted everywhere, and nothing is logged', async () => {
    const debug = jest.fn();
    const rl = suite.engine({ logger: { warn: () => undefined, debug } });
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
    const rl = suite.engine({ requestTimeout: 200, logger: { warn: () => undefined, debug } });
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
});
