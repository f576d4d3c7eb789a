/**
 * Nothing a finished wait leaves behind keeps other waiters' memory alive (item 10:
 * long-running processes stay flat). Found by the 10-minute soak: with one AbortSignal shared
 * by every acquire (an application's shutdown signal, say), the heap grew by about 4 MB a
 * minute. The signal's one abort listener (lib/core/base/wake.ts) was made in the scope of the first
 * waiter's call and kept its wake-up closure, that closure kept the waiter's queue entry, and
 * every entry that left the queue kept a link to the one queued after it
 * (lib/core/fair/fair-queue.ts): one chain of every entry ever queued behind it.
 */
import { describe, expect, it } from '@jest/globals';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { FairQueue } from '../../../lib/core/fair/fair-queue';
import type { LockStore } from '../../../lib/core/store';
import { onAbort } from '../../../lib/core/base/wake';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** Collects garbage once the current job is over (a WeakRef target lives until then). */
async function collected(ref: WeakRef<object>): Promise<boolean> {
  await new Promise((r) => setTimeout(r, 0));
  gc();
  return ref.deref() === undefined;
}

describe('a shared abort signal', () => {
  it('does not keep the first waiter alive after it stopped watching', async () => {
    const signal = new AbortController().signal; // lives on: never aborted
    const make = (): { wake: () => void; ref: WeakRef<object> } => {
      const state = { payload: new Array(1000).fill(0) };
      return { wake: () => void state.payload.length, ref: new WeakRef(state) };
    };
    const first = make();
    const second = make();
    // The first waiter installs the signal's listener; then both stop watching. In a function
    // of its own: the stop functions hold their waiter (as a sleeping waiter's own closures do)
    // and must not linger in this async frame.
    ((): void => {
      const stops = [onAbort(signal, first.wake), onAbort(signal, second.wake)];
      for (const stop of stops) stop();
    })();
    first.wake = () => undefined;
    second.wake = () => undefined;
    expect(await collected(first.ref)).toBe(true);
    expect(await collected(second.ref)).toBe(true);
  });

  it('still wakes every waiter that watches when it aborts', () => {
    const controller = new AbortController();
    const woken: number[] = [];
    onAbort(controller.signal, () => woken.push(1));
    const stop = onAbort(controller.signal, () => woken.push(2));
    onAbort(controller.signal, () => woken.push(3));
    stop();
    controller.abort();
    expect(woken).toEqual([1, 3]);
  });
});

describe('the local queue', () => {
  const store = { watchReleases: () => Promise.resolve(undefined) } as unknown as LockStore;

  it('an entry that left keeps no link to the entries queued after it', async () => {
    const queue = new FairQueue(store, new AbortController().signal);
    const first = queue.join(['r'], true);
    let second: ReturnType<FairQueue['join']> | undefined = queue.join(['r'], true);
    const ref = new WeakRef(second);
    const third = queue.join(['r'], true);
    queue.leave(first);
    queue.leave(second);
    second = undefined;
    // `first` is still referenced here (as by a caller's frame): `second` must not be.
    expect(first.slots[0].next).toBeUndefined();
    expect(first.slots[0].prev).toBeUndefined();
    expect(await collected(ref)).toBe(true);
    expect(third.slots[0].prev).toBeUndefined(); // the queue itself is intact: third is first
    queue.leave(third);
    expect(queue.size).toBe(0);
    queue.close();
  });
});
