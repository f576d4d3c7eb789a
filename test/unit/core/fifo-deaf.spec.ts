/**
 * The default waiting policy (waiting/fifo-queue.ts) and an engine that hands a resource to its
 * own next holder: a head refused by two holders of that engine in a row polls (the
 * algorithm's random delay), without watching the resource's announcements, until a refusal
 * names another engine's holder. Pure logic: a fake store that only announces
 * (test/unit/fair/announce-bus.ts).
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { FifoQueue } from '../../../lib/core/waiting/fifo-queue';
import { newEngineId, newToken } from '../../../lib/core/base/token';
import { bus } from '../fair/announce-bus';

const queues: FifoQueue[] = [];
afterEach(() => {
  for (const q of queues.splice(0)) q.close();
});

/** Whether `p` settled by now (after pending microtasks). */
async function settled(p: Promise<void>): Promise<boolean> {
  let done = false;
  void p.then(() => (done = true));
  for (let i = 0; i < 5; i++) await Promise.resolve();
  return done;
}

describe('a head refused by two holders of one engine in a row', () => {
  it('polls, not watching, until another engine holds the resource', async () => {
    const { store, announce, watches } = bus();
    const queue = new FifoQueue(store, new AbortController().signal);
    queues.push(queue);
    const x = newEngineId();
    const y = newEngineId();
    const ticket = queue.join(['r'], true);
    const far = Number.MAX_SAFE_INTEGER;

    // Refused by X's holder: sleeps until its release, which wakes it.
    const x1 = newToken(x);
    expect(queue.refused(ticket, [], x1)).toBeUndefined();
    expect(await queue.watch(ticket, 0)).toEqual({ fresh: false, live: true });
    expect(watches()).toBe(1);
    let sleep = queue.sleep(ticket, far, undefined);
    announce('release', x1);
    expect(await settled(sleep)).toBe(true);

    // Then refused by X's next holder: X hands it on locally. Poll: the watch ends (no
    // release wakes the head), and none is made while it polls.
    const x2 = newToken(x);
    expect(queue.refused(ticket, [], x2)).toBe('poll');
    expect(watches()).toBe(0);
    expect(await queue.watch(ticket, 0)).toEqual({ fresh: false, live: false });
    expect(watches()).toBe(0);
    const polling = new AbortController();
    sleep = queue.sleep(ticket, far, polling.signal);
    announce('release', x2);
    announce('release', newToken(y));
    expect(await settled(sleep)).toBe(false);
    polling.abort(); // (its retry delay ends)
    await sleep.catch(() => undefined);

    // Refused by X again after a poll: still polling; split votes (no holder on a quorum)
    // change nothing.
    expect(queue.refused(ticket, [], newToken(x))).toBe('poll');
    expect(queue.refused(ticket, [], undefined)).toBe('poll');
    await queue.watch(ticket, 0);
    expect(watches()).toBe(0);
    // Refused by Y's holder: back to sleeping until its release, with a new watch.
    const y1 = newToken(y);
    expect(queue.refused(ticket, [], y1)).toBeUndefined();
    expect(await queue.watch(ticket, 0)).toEqual({ fresh: false, live: true });
    expect(watches()).toBe(1);
    sleep = queue.sleep(ticket, far, undefined);
    announce('release', y1);
    expect(await settled(sleep)).toBe(true);
    // X's holder once (not twice in a row): its release is heard again.
    expect(queue.refused(ticket, [], newToken(x))).toBeUndefined();
    sleep = queue.sleep(ticket, far, undefined);
    announce('release', newToken(x));
    expect(await settled(sleep)).toBe(true);
  });

  it('is not deaf when the holders are of two engines, or the same holder twice', async () => {
    const { store, announce } = bus();
    const queue = new FifoQueue(store, new AbortController().signal);
    queues.push(queue);
    const ticket = queue.join(['r'], true);
    const x1 = newToken(newEngineId());
    queue.refused(ticket, [], x1);
    await queue.watch(ticket, 0);
    const sleep = queue.sleep(ticket, Number.MAX_SAFE_INTEGER, undefined);
    announce('release', x1);
    await sleep;
    expect(queue.refused(ticket, [], newToken(newEngineId()))).toBeUndefined();
    // The same holder twice: its release had not reached every master (handoff.spec.ts).
    const z = newToken(newEngineId());
    expect(queue.refused(ticket, [], z)).toBeUndefined();
    expect(queue.refused(ticket, [], z)).toBeUndefined();
  });
});
