/**
 * The clock watch's decisions over recorded readings (lib/core/redis/masters/clock-watch.ts),
 * without Redis: which votes it turns, and what it tells the log. Its real faults are
 * test/core/faults/clock-jump.spec.ts.
 */
import type { NodeVote } from '../../../lib/core/base/errors';
import { ClockWatch } from '../../../lib/core/redis/masters/clock-watch';
import type { MasterNode } from '../../../lib/core/redis/masters/node';
import { recordingLogger } from '../../harness/util';

const EPOCH = 1_800_000_000_000;

function watch(n: number): { w: ClockWatch; messages: string[] } {
  const logger = recordingLogger();
  const nodes = Array.from(
    { length: n },
    (_, index) =>
      ({
        index,
        name: `m${index}:6379`,
        cluster: false,
        connection: { isReady: false },
      }) as unknown as MasterNode,
  );
  const w = new ClockWatch(nodes, {
    enabled: true,
    driftFactor: 0.01,
    tolerance: 1000,
    duration: 60_000,
    logger,
  });
  return { w, messages: logger.messages };
}

/** Every master's reading, `offsets[i]` ms off the monotonic clock, read now. */
function readAll(w: ClockWatch, offsets: readonly number[]): void {
  const now = performance.now();
  offsets.forEach((o, i) => w.record(i, { server: EPOCH + now + o, sent: now, received: now }));
}

const okVotes = (n: number): NodeVote[] =>
  Array.from({ length: n }, (_, node) => ({
    node,
    name: `m${node}:6379`,
    outcome: 'ok',
    latency: 1,
  }));

describe('ClockWatch.review', () => {
  it('counts masters whose clocks agree, and says nothing', () => {
    const { w, messages } = watch(3);
    readAll(w, [0, 3, -2]);
    const votes = okVotes(3);
    expect(w.review(votes)).toBe(0);
    expect(votes.map((v) => v.outcome)).toEqual(['ok', 'ok', 'ok']);
    expect(messages).toEqual([]);
  });

  it('turns the vote of the master off the others, and says so once', () => {
    const { w, messages } = watch(3);
    readAll(w, [0, 30_000, 0]);
    const votes = okVotes(3);
    expect(w.review(votes)).toBe(1);
    expect(votes[1]).toMatchObject({ outcome: 'quarantined' });
    expect(votes[1].quarantineRemaining).toBeGreaterThan(59_000);
    readAll(w, [0, 30_000, 0]);
    w.review(okVotes(3));
    expect(messages).toHaveLength(1);
    expect(messages[0]).toMatch(/m1:6379's clock is 30 s ahead of the other masters'/);
  });

  it('says so when no majority of the clocks agrees, instead of turning the votes silently', () => {
    const { w, messages } = watch(3);
    readAll(w, [0, 5000, -5000]);
    const votes = okVotes(3);
    expect(w.review(votes)).toBe(3);
    expect(messages).toHaveLength(3);
    expect(messages[0]).toMatch(/m0:6379's clock cannot be checked: no majority/);
    // Once per master, until it is found in line.
    readAll(w, [0, 5000, -5000]);
    w.review(okVotes(3));
    expect(messages).toHaveLength(3);
  });

  it('waits without a word while too few masters were read', () => {
    const { w, messages } = watch(3);
    const now = performance.now();
    w.record(0, { server: EPOCH + now, sent: now, received: now });
    const votes = okVotes(3);
    expect(w.review(votes)).toBe(1); // not yet found in line with anyone: not counted
    expect(messages).toEqual([]);
  });
});
