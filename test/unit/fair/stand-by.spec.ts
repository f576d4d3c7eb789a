/**
 * Named yields (lib/core/fair/announced.ts `standBy`, fair/streak.ts `STAND_BY_MS`): an
 * ordered yield's announcement names the engine the masters keep the key for. That engine's
 * head attempts at once; the other engines' heads stand by instead of attempting into the
 * reservation — an engine in the order until the next announcement (or STAND_BY_MS without one),
 * an engine that is not in the order for STAND_BY_MS whatever comes, so that it gets into the
 * order and is named in turn. Engines' local queues over a fake announcement bus (pure logic:
 * only announcements and refusals matter), with Jest's fake clock.
 */
import { describe, expect, it, jest } from '@jest/globals';
import { FairQueue } from '../../../lib/core/fair/fair-queue';
import type { Ticket } from '../../../lib/core/fair/fair-queue';
import type { LockStore } from '../../../lib/core/store';
import { bus, fakeClockQueues } from './announce-bus';
import { RACE_LEVELS, STAND_BY_MS, raceDelay } from '../../../lib/core/fair/streak';

const queues = fakeClockQueues();

/**
 * An engine's queue with one waiter for 'r' that watches the bus; `ordered`: its last attempt
 * was refused by another engine's lock (the masters entered it in the order).
 */
async function waiter(store: LockStore, ordered: boolean) {
  const queue = new FairQueue(store, new AbortController().signal);
  queues.push(queue);
  const ticket: Ticket = queue.join(['r'], true);
  queue.refused(ticket, [], ordered ? 'holder' : undefined);
  await queue.watch(ticket, 0);
  let woken = 0;
  const sleep = (): void => {
    void queue.sleep(ticket, Infinity, undefined).then(() => woken++);
  };
  sleep();
  return { sleep, woken: () => woken };
}

/** Lets the promise callbacks of what was just woken run. */
const settle = async (): Promise<void> => {
  for (let i = 0; i < 3; i++) await Promise.resolve();
};

describe('named yields', () => {
  it('the named engine attempts at once, whatever races it lost', async () => {
    const { store, announce } = bus(true);
    const w = await waiter(store, true);
    expect(raceDelay({ lost: 1 })).toBeGreaterThan(0); // unnamed, it would wait its turn
    announce('yield', 'y1', false, 'own');
    await settle();
    expect(w.woken()).toBe(1);
  });

  it('an engine in the order stands by: the next announcement, not a timer, wakes it', async () => {
    const { store, announce } = bus(true);
    const w = await waiter(store, true);
    announce('yield', 'y1', false, 'other');
    jest.advanceTimersByTime(RACE_LEVELS * 10); // past every race delay
    await settle();
    expect(w.woken()).toBe(0);
    // The named engine took the key and yields in turn, naming another: still standing by,
    // and the first stand-by no longer counts.
    announce('yield', 'y2', false, 'other');
    jest.advanceTimersByTime(STAND_BY_MS - RACE_LEVELS * 10);
    await settle();
    expect(w.woken()).toBe(0);
    announce('release', 'y3', false, undefined);
    await settle();
    expect(w.woken()).toBe(1);
  });

  it('an engine in the order attempts once no announcement came for STAND_BY_MS', async () => {
    const { store, announce } = bus(true);
    const w = await waiter(store, true);
    announce('yield', 'y1', false, 'other'); // the named engine never takes the key
    jest.advanceTimersByTime(STAND_BY_MS - 1);
    await settle();
    expect(w.woken()).toBe(0);
    jest.advanceTimersByTime(1);
    await settle();
    expect(w.woken()).toBe(1);
  });

  it('an engine not in the order attempts after STAND_BY_MS, however many yields name others', async () => {
    const { store, announce } = bus(true);
    const w = await waiter(store, false);
    for (let t = 0; t < STAND_BY_MS; t += 10) {
      announce('yield', `y${t}`, false, 'other');
      jest.advanceTimersByTime(10);
    }
    await settle();
    expect(w.woken()).toBe(1); // refused by the next holder, it enters the order
    // One stand-by attempt at a time: the yields heard meanwhile armed no other.
    w.sleep();
    jest.advanceTimersByTime(STAND_BY_MS);
    await settle();
    expect(w.woken()).toBe(1);
  });

  it('a yield that names nobody is a race as before', async () => {
    const { store, announce } = bus(true);
    const w = await waiter(store, true);
    announce('yield', 'y1', false, undefined);
    await settle();
    expect(w.woken()).toBe(0);
    jest.advanceTimersByTime(raceDelay({ lost: 1 }));
    await settle();
    expect(w.woken()).toBe(1);
  });
});
