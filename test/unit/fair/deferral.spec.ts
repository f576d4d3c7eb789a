/**
 * Deferring to other engines' pollers (lib/core/fair/fair-queue.ts, fair/streak.ts): after
 * a yield to pollers a queue's attempts defer (`AttemptRequest.defer`) until a holder of another
 * engine refuses them or they are granted; a queue that another engine's holder refused marked
 * the resource for its engine, and takes the mark down when it ends (also with a live release
 * watch). A fake store: only the token owner test and the take-down matter here.
 */
import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { FairQueue } from '../../../lib/core/fair/fair-queue';
import { defers } from '../../../lib/core/fair/queue-lines';
import type { Line } from '../../../lib/core/fair/queue-lines';
import type { LockStore } from '../../../lib/core/store';
import type {
  FairAnnounced as Announced,
  FairAnnouncementListener as AnnouncementListener,
} from '../../../lib/core/fair/fair-announcements';

const queues: FairQueue[] = [];
afterEach(() => {
  for (const q of queues.splice(0)) q.close();
});

/** A queue over a store without announcements whose engine's tokens start with `me:`. */
function setup(): {
  queue: FairQueue;
  unmark: jest.Mock<(resource: string) => void>;
  announce: (announced: Announced, token: string) => void;
} {
  const unmark = jest.fn<(resource: string) => void>();
  const listeners: AnnouncementListener[] = [];
  const store = {
    quorum: 2,
    watchFairReleases: (_resource: string, on: AnnouncementListener) => {
      listeners.push(on);
      return Promise.resolve(undefined);
    },
    ownsToken: (token: string) => token.startsWith('me:'),
    unmarkPolling: unmark,
  } as unknown as LockStore;
  const queue = new FairQueue(store, new AbortController().signal);
  queues.push(queue);
  const announce = (announced: Announced, token: string): void => {
    for (const on of listeners) on(announced, token, false, undefined, false);
  };
  return { queue, unmark, announce };
}

/** The queue's line of `resource` (internal state, to start from a yield to pollers). */
function lineOf(queue: FairQueue, resource: string): Line {
  return (queue as unknown as { lines: Map<string, Line> }).lines.get(resource) as Line;
}

describe('deferring to pollers', () => {
  it('lasts until a holder of another engine refuses the queue, not beyond', () => {
    const { queue } = setup();
    const ticket = queue.join(['r'], true);
    expect(defers(ticket)).toBe(false);
    lineOf(queue, 'r').deferring = true; // the queue yielded to pollers
    expect(defers(ticket)).toBe(true);
    queue.refused(ticket, [], undefined); // a deferral, or split votes: no one took it yet
    expect(defers(ticket)).toBe(true);
    queue.refused(ticket, [], 'me:own-holder'); // its own engine's holder: not a poller
    expect(defers(ticket)).toBe(true);
    queue.refused(ticket, [], 'other:holder'); // a poller took the resource
    expect(defers(ticket)).toBe(false);
  });

  it("ends at another engine's release announcement: a poller took the resource meanwhile", async () => {
    // Woken by the poller's announcements, the attempts ran while the key was free: no holder
    // refused them, and they deferred to the joined mark until it expired (a streak of 25 of
    // the other engine in test/core/cluster.spec.ts).
    const { queue, announce } = setup();
    const ticket = queue.join(['a'], true);
    queue.refused(ticket, [], 'me:own-holder'); // a contended attempt starts the release watch
    await queue.watch(ticket, 0);
    lineOf(queue, 'a').deferring = true; // the queue yielded to pollers
    announce('cleanup', 'other:failed-attempt'); // not a holder's release
    announce('release', 'me:own-holder'); // its own engine's lock
    expect(defers(ticket)).toBe(true);
    announce('yield', 'other:holder');
    expect(defers(ticket)).toBe(false);
    lineOf(queue, 'a').deferring = true;
    announce('release', 'other:holder2');
    expect(defers(ticket)).toBe(false);
  });

  it("a queue refused by another engine's holder takes its mark down when it ends", () => {
    const { queue, unmark } = setup();
    const marked = queue.join(['m'], true);
    queue.refused(marked, [], 'other:holder');
    const unmarked = queue.join(['u'], true);
    queue.refused(unmarked, [], 'me:own-holder');
    queue.leave(unmarked);
    expect(unmark).not.toHaveBeenCalled();
    queue.leave(marked);
    expect(unmark.mock.calls).toEqual([['m']]);
  });

  it('takes it down with a live release watch too (a Cluster of several nodes reads marks)', () => {
    const { queue, unmark } = setup();
    const ticket = queue.join(['w'], true);
    queue.refused(ticket, [], 'other:holder');
    lineOf(queue, 'w').watch = { activeSince: 0, live: true, stop: () => undefined };
    queue.leave(ticket);
    expect(unmark.mock.calls).toEqual([['w']]);
  });
});
