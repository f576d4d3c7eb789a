/**
 * Ordered races after a yield (lib/core/fair/fair-queue.ts, raceDelay): two engines' local
 * queues over one announcement bus (a fake store: only release announcements matter here). On
 * a yield announcement the head of the queue that lost more races since its last grant is woken
 * first, whatever the order in which the engines hear it; a plain release wakes every head at
 * once; another engine's clean-up wakes each head at a random time (COLLISION_SPREAD_MS).
 * Jest's fake clock (the wake-ups are timed): on the real one, a process descheduled for a few
 * milliseconds while the second head scheduled its wake-up put it after the first's (the flake
 * check, a busy core, once in two full runs).
 */
import { describe, expect, it, jest } from '@jest/globals';
import { monotonicNow } from '../../../lib/core/base/clock';
import {
  COLLISION_SPREAD_MS,
  RACE_LEVELS,
  RACE_STEP_MS,
  raceDelay,
} from '../../../lib/core/fair/streak';
import { FairQueue } from '../../../lib/core/fair/fair-queue';
import type { Ticket } from '../../../lib/core/fair/fair-queue';
import type { LockStore } from '../../../lib/core/store';
import { bus, fakeClockQueues } from './announce-bus';

const queues = fakeClockQueues();

/**
 * Runs the fake clock forward `ms` ms, one millisecond at a time, letting the woken sleeps'
 * continuations run after each.
 */
async function runFor(ms: number): Promise<void> {
  for (let i = 0; i < ms; i++) {
    jest.advanceTimersByTime(1);
    for (let j = 0; j < 3; j++) await Promise.resolve();
  }
}

/** An engine's queue with one waiter for `resource` that lost `lost` races; it watches the bus. */
async function waiter(
  store: LockStore,
  resource: string,
  lost: number,
): Promise<{ queue: FairQueue; ticket: Ticket }> {
  const queue = new FairQueue(store, new AbortController().signal);
  queues.push(queue);
  const ticket = queue.join([resource], true);
  for (let i = 0; i < lost; i++) queue.refused(ticket, [], 'holder');
  await queue.watch(ticket, 0);
  return { queue, ticket };
}

describe('ordered races', () => {
  it('after a yield, the head that lost more races attempts first, whoever hears it first', async () => {
    const { store, announce } = bus();
    // `late` watches first, so it hears every announcement first.
    const late = await waiter(store, 'r', 1);
    const early = await waiter(store, 'r', RACE_LEVELS);
    const woken: string[] = [];
    const sleeps = [
      late.queue.sleep(late.ticket, Infinity, undefined).then(() => woken.push('late')),
      early.queue.sleep(early.ticket, Infinity, undefined).then(() => woken.push('early')),
    ];
    announce('yield');
    await runFor(RACE_LEVELS * RACE_STEP_MS + 1);
    await Promise.all(sleeps);
    expect(woken).toEqual(['early', 'late']);
  });

  it('a plain release wakes every head at once, in the order they hear it', async () => {
    const { store, announce } = bus();
    const first = await waiter(store, 'r', 0);
    const second = await waiter(store, 'r', RACE_LEVELS);
    let woken = 0;
    void first.queue.sleep(first.ticket, Infinity, undefined).then(() => woken++);
    void second.queue.sleep(second.ticket, Infinity, undefined).then(() => woken++);
    announce('release');
    await Promise.resolve();
    expect(woken).toBe(2); // no delay: woken within the announcement's tick
  });

  it("after another engine's clean-up (votes split), the heads attempt at random times within COLLISION_SPREAD_MS", async () => {
    const { store, announce } = bus();
    const heads = [];
    for (let i = 0; i < 2; i++) {
      const queue = new FairQueue(store, new AbortController().signal);
      queues.push(queue);
      const ticket = queue.join(['r'], true);
      queue.refused(ticket, [], undefined); // no holder with a quorum: split votes
      await queue.watch(ticket, 0);
      heads.push({ queue, ticket });
    }
    const woken: number[] = [];
    const at: number[] = [];
    const sleeps = heads.map(({ queue, ticket }, i) =>
      queue.sleep(ticket, Infinity, undefined).then(() => {
        woken.push(i);
        at[i] = monotonicNow();
      }),
    );
    // The first head to hear it draws the later time.
    const random = jest.spyOn(Math, 'random').mockReturnValueOnce(0.9).mockReturnValueOnce(0.1);
    const started = monotonicNow();
    try {
      announce('cleanup');
    } finally {
      random.mockRestore();
    }
    await Promise.resolve();
    expect(woken).toEqual([]); // not within the announcement's tick
    await runFor(COLLISION_SPREAD_MS + 1);
    await Promise.all(sleeps);
    expect(woken).toEqual([1, 0]);
    expect(at[1] - started).toBeLessThanOrEqual(0.1 * COLLISION_SPREAD_MS + 1);
    expect(at[0] - started).toBeGreaterThanOrEqual(0.9 * COLLISION_SPREAD_MS - 1);
  });

  it('raceDelay: one step per race not yet lost, none from RACE_LEVELS lost races on', () => {
    expect(raceDelay({ lost: 0 })).toBe(RACE_LEVELS * RACE_STEP_MS);
    expect(raceDelay({ lost: 1 })).toBe((RACE_LEVELS - 1) * RACE_STEP_MS);
    expect(raceDelay({ lost: RACE_LEVELS })).toBe(0);
    expect(raceDelay({ lost: RACE_LEVELS + 5 })).toBe(0);
  });
});

describe('a refusal by a holder whose release was already announced', () => {
  // The masters ran the attempt before that release, and its replies were read after the
  // announcements: nothing is left to wake the waiter (lib/core/fair/fair-queue.ts, refused).
  it('asks for a retry at once the first time, then for polling; other holders as before', async () => {
    const { store, announce } = bus();
    const { queue, ticket } = await waiter(store, 'r', 0);
    expect(queue.refused(ticket, [], 'h1')).toBeUndefined();
    announce('release', 'h2'); // heard from one master: the others will announce it later
    expect(queue.refused(ticket, [], 'h2')).toBeUndefined();
    announce('release', 'h2', true); // …from a quorum: nobody is left to wake the waiter
    expect(queue.refused(ticket, [], 'h2')).toBe('retry');
    expect(queue.refused(ticket, [], 'h2')).toBe('poll'); // its keys are still on a quorum
    expect(queue.refused(ticket, [], 'h1')).toBeUndefined();
    expect(queue.refused(ticket, [], undefined)).toBeUndefined();
  });

  it('counts a yield, not the clean-up of a failed attempt', async () => {
    const { store, announce } = bus();
    const { queue, ticket } = await waiter(store, 'r', 0);
    for (let i = 0; i < 2; i++) announce('cleanup', 'c1', i > 0);
    for (let i = 0; i < 2; i++) announce('yield', 'y1', i > 0);
    expect(queue.refused(ticket, [], 'c1')).toBeUndefined();
    expect(queue.refused(ticket, [], 'y1')).toBe('retry');
  });
});
