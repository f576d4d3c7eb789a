/**
 * Hand-over across processes, the local queue's part (lib/core/fair/fair-queue.ts
 * `installed`): a grant installed for this engine goes to the head of its resource's queue —
 * taken by its next turn of the acquire loop — only when that head is a plain, single-resource
 * request of the grant's ttl; otherwise (no queue, another ttl) the grant is released at once.
 * A failed install wakes the head, which attempts as usual. Pure logic: a fake store.
 */
import { describe, expect, it, jest } from '@jest/globals';
import { FairQueue } from '../../../lib/core/fair/fair-queue';
import type { Grant, LockStore } from '../../../lib/core/store';

function fakeStore() {
  let handler: ((resource: string, grant: Grant | undefined) => void) | undefined;
  const release = jest.fn(() => Promise.resolve({ deleted: 0, complete: true, votes: [] }));
  const store = {
    quorum: 2,
    release,
    onInstalled: (h: (resource: string, grant: Grant | undefined) => void) => (handler = h),
  } as unknown as LockStore;
  return {
    store,
    release,
    install: (resource: string, grant: Grant | undefined) => handler?.(resource, grant),
  };
}

const grantOf = (resource: string, ttl: number): Grant => ({
  resources: [resource],
  token: 'installed-token',
  ttl,
  start: 0,
  wallStart: 0,
  votes: [],
  fencingTokens: [],
  ended: false,
});

describe('installed grants in the local queue', () => {
  it('the sleeping head of the queue takes a grant of its ttl', async () => {
    const { store, release, install } = fakeStore();
    const queue = new FairQueue(store, new AbortController().signal);
    const ticket = queue.join(['r'], true, 5000);
    const slept = queue.sleep(ticket, Infinity, undefined);
    const grant = grantOf('r', 5000);
    install('r', grant);
    await slept; // woken
    expect(ticket.installed).toBe(grant);
    expect(release).not.toHaveBeenCalled();
    queue.close();
  });

  it('a grant nobody here can take is released at once', () => {
    const { store, release, install } = fakeStore();
    const queue = new FairQueue(store, new AbortController().signal);
    const ticket = queue.join(['r'], true, 5000);
    void queue.sleep(ticket, Infinity, undefined);
    const otherTtl = grantOf('r', 6000);
    install('r', otherTtl);
    const noQueue = grantOf('s', 5000);
    install('s', noQueue);
    expect(ticket.installed).toBeUndefined();
    expect(release.mock.calls.map((c) => (c as unknown[])[0])).toEqual([otherTtl, noQueue]);
    // Marked ended: a late install of its token is deleted, not kept as part of a lock.
    expect(otherTtl.ended && noQueue.ended).toBe(true);
    // A shared (non-exclusive) head does not take it either.
    const shared = queue.join(['t'], false, 5000);
    void queue.sleep(shared, Infinity, undefined);
    install('t', grantOf('t', 5000));
    expect(shared.installed).toBeUndefined();
    expect(release).toHaveBeenCalledTimes(3);
    queue.close();
  });

  it('a queue that ends takes its parked tokens back, even when no refusal marked it', () => {
    const { store } = fakeStore();
    const unmark = jest.fn();
    Object.assign(store, { hasParked: () => true, unmarkPolling: unmark });
    const queue = new FairQueue(store, new AbortController().signal);
    const ticket = queue.join(['r'], true, 5000);
    queue.leave(ticket);
    expect(unmark).toHaveBeenCalledWith('r');
    queue.close();
  });

  it('a failed install wakes the head, which attempts', async () => {
    const { store, install } = fakeStore();
    const queue = new FairQueue(store, new AbortController().signal);
    const ticket = queue.join(['r'], true, 5000);
    const slept = queue.sleep(ticket, Infinity, undefined);
    install('r', undefined);
    await slept;
    expect(ticket.installed).toBeUndefined();
    queue.close();
  });
});
