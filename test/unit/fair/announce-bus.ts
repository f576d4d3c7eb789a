/**
 * A fake lock store that only announces (3 masters, quorum 2), for the local queue's unit tests
 * (pure logic: only release announcements and refusals matter there). `announce` calls every
 * watch, in the order they were made. `foreignTokens`: every token is another engine's
 * (`ownsToken` false), so that a refusal by one enters the engine in the order.
 */
import { afterEach, beforeEach, jest } from '@jest/globals';
import { performance } from 'node:perf_hooks';
import type { FairQueue } from '../../../lib/core/fair/fair-queue';
import type { LockStore, ReleaseWatch } from '../../../lib/core/store';
import type {
  FairAnnounced as Announced,
  FairAnnouncementListener as AnnouncementListener,
  Reserved,
} from '../../../lib/core/fair/fair-announcements';

export function bus(foreignTokens = false): {
  store: LockStore;
  announce(announced: Announced, token?: string, repeat?: boolean, reserved?: Reserved): void;
  /** The watches made and not stopped. */
  watches(): number;
} {
  const listeners = new Set<AnnouncementListener>();
  const watch = (_resource: string, on: AnnouncementListener): Promise<ReleaseWatch> => {
    listeners.add(on);
    return Promise.resolve({
      activeSince: -Infinity,
      live: true,
      stop: () => listeners.delete(on),
    });
  };
  // The fair queue watches with watchFairReleases, the default one (waiting/fifo-queue.ts)
  // with watchReleases (its listeners take the first three arguments).
  const store = {
    quorum: 2,
    ...(foreignTokens ? { ownsToken: () => false } : {}),
    watchFairReleases: watch,
    watchReleases: watch,
  } as unknown as LockStore;
  return {
    store,
    announce: (announced, token = 'released-token', repeat = false, reserved = undefined) => {
      for (const on of [...listeners]) on(announced, token, repeat, reserved);
    },
    watches: () => listeners.size,
  };
}

/**
 * Jest's fake clock for each test of the calling file, with the engine's monotonic clock
 * (lib/core/base/clock.ts reads perf_hooks) made to follow it; the queues pushed on the returned list
 * are closed after each test.
 */
export function fakeClockQueues(): FairQueue[] {
  const queues: FairQueue[] = [];
  beforeEach(() => {
    jest.useFakeTimers();
    jest.spyOn(performance, 'now').mockImplementation(() => Date.now());
  });
  afterEach(() => {
    for (const q of queues.splice(0)) q.close();
    jest.restoreAllMocks();
    jest.useRealTimers();
  });
  return queues;
}
