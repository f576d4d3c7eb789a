/**
 * A holder that keeps running past its validity without the event loop turning (a long
 * synchronous step; a GC pause or SIGSTOP looks the same from inside): the signal it was given
 * must read aborted right after, not only once the expiry timer had its turn. The README's
 * `signal.throwIfAborted()` before a side effect relies on it.
 */
import { performance } from 'node:perf_hooks';
import { LockLostError } from '../../lib/core';
import { useMasters } from '../harness/engines';

const suite = useMasters(3);

/** Blocks the event loop for `ms` (the holder's own clock keeps running). */
function block(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // spin
  }
}

describe('a holder blocked past its validity', () => {
  it('reads its using() signal aborted right after the block (aborted, reason, throwIfAborted)', async () => {
    const redlock = suite.engine();
    const seen = await redlock.using(
      'paused:using',
      (signal, lock) => {
        const before = signal.aborted;
        block(600);
        const validAfter = lock.isValid;
        const abortedAfter = signal.aborted;
        const reason: unknown = signal.reason;
        let thrown: unknown;
        try {
          signal.throwIfAborted();
        } catch (err) {
          thrown = err;
        }
        return { before, validAfter, abortedAfter, reason, thrown };
      },
      { ttl: 300 },
    );
    expect(seen.before).toBe(false);
    expect(seen.validAfter).toBe(false);
    expect(seen.abortedAfter).toBe(true);
    expect(seen.reason).toBeInstanceOf(LockLostError);
    expect(seen.thrown).toBe(seen.reason);
  });

  it('a kept signal of an acquired lock reads aborted after the block, its abort event fired once', async () => {
    const redlock = suite.engine();
    const lock = await redlock.acquire('paused:kept', { ttl: 300 });
    const signal = lock.signal;
    let events = 0;
    signal.addEventListener('abort', () => events++);
    block(600);
    expect(() => signal.throwIfAborted()).toThrow(LockLostError);
    expect(signal.aborted).toBe(true);
    expect(events).toBe(1);
    await lock.release();
  });

  it('a signal read within the validity, or after its own release, does not abort', async () => {
    const redlock = suite.engine();
    const lock = await redlock.acquire('paused:released', { ttl: 2000 });
    const signal = lock.signal;
    expect(signal.aborted).toBe(false);
    await lock.release();
    block(50);
    expect(signal.aborted).toBe(false); // released by its holder: not a loss
    const extended = await redlock.acquire('paused:extended', { ttl: 400 });
    const s2 = extended.signal;
    await extended.extend(5000);
    block(500); // past the first ttl, inside the extended one
    expect(s2.aborted).toBe(false);
    await extended.release();
  });
});
