/**
 * Clean-up announcements (lib/core/fair/fair-queue.ts): the clean-up of a failed attempt or
 * install does not wake a head that one holder refused on a quorum — that holder still holds —
 * unless the clean-up is that holder's own: a failed attempt or install that had a quorum of
 * masters but no validity left, whose keys are gone now. Woken, the head attempts after the
 * clean-up's random spread. A local queue over a fake announcement bus, with Jest's fake clock.
 */
import { describe, expect, it, jest } from '@jest/globals';
import { FairQueue } from '../../../lib/core/fair/fair-queue';
import { COLLISION_SPREAD_MS } from '../../../lib/core/fair/streak';
import { bus, fakeClockQueues } from './announce-bus';

const queues = fakeClockQueues();

const settle = async (): Promise<void> => {
  for (let i = 0; i < 3; i++) await Promise.resolve();
};

describe('clean-up announcements', () => {
  it("wake a head refused by one holder only when they are that holder's", async () => {
    const { store, announce } = bus(true);
    const queue = new FairQueue(store, new AbortController().signal);
    queues.push(queue);
    const ticket = queue.join(['r'], true);
    queue.refused(ticket, [], 'holder-token'); // refused by that holder on a quorum
    await queue.watch(ticket, 0);
    let woken = 0;
    void queue.sleep(ticket, Infinity, undefined).then(() => woken++);
    announce('cleanup', 'someone-elses-failed-attempt');
    jest.advanceTimersByTime(COLLISION_SPREAD_MS + 1);
    await settle();
    expect(woken).toBe(0); // the holder still holds
    announce('cleanup', 'holder-token'); // the holder was a failed attempt: its keys are gone
    jest.advanceTimersByTime(COLLISION_SPREAD_MS + 1);
    await settle();
    expect(woken).toBe(1);
  });
});
