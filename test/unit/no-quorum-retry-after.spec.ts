import { NoQuorumError, WaitTimeoutError } from '../../lib';
import type { NodeOutcome, NodeVote } from '../../lib';
import { classifyLockError, noQuorumRetryAfter } from '../../lib/errors/lock-failure';

/** Retry-After of a no-quorum failure: when `quorum` masters can vote again (pure logic). */
function vote(node: number, outcome: NodeOutcome, quarantineRemaining?: number): NodeVote {
  return {
    node,
    name: `m${node}`,
    outcome,
    latency: 1,
    ...(quarantineRemaining === undefined ? {} : { quarantineRemaining }),
  };
}

function noQuorum(votes: readonly NodeVote[], quorum = 2): NoQuorumError {
  return new NoQuorumError({
    resources: ['r'],
    votes,
    attempts: 1,
    elapsed: 1,
    reason: 'unavailable',
    quorum,
  });
}

it.each([
  [
    'three fresh masters: the second to leave quarantine makes the quorum',
    [
      vote(0, 'quarantined', 41_200),
      vote(1, 'quarantined', 42_000),
      vote(2, 'quarantined', 40_100),
    ],
    42,
  ],
  [
    "one usable, one quarantined: that one's end",
    [vote(0, 'ok'), vote(1, 'quarantined', 9_001), vote(2, 'quarantined', 30_000)],
    10,
  ],
  [
    'a master down may come back any moment: no promise beyond a second',
    [vote(0, 'ok'), vote(1, 'error'), vote(2, 'quarantined', 30_000)],
    1,
  ],
  [
    'unknown remaining counts as now',
    [vote(0, 'quarantined'), vote(1, 'timeout'), vote(2, 'error')],
    1,
  ],
] as const)('%s', (_label, votes, seconds) => {
  expect(noQuorumRetryAfter(noQuorum(votes))).toBe(seconds);
  expect(classifyLockError(noQuorum(votes))?.retryAfter).toBe(seconds);
});

it('a wait timeout caused by no quorum carries the same figure', () => {
  const cause = noQuorum([
    vote(0, 'quarantined', 5_000),
    vote(1, 'quarantined', 7_500),
    vote(2, 'error'),
  ]);
  const err = new WaitTimeoutError(
    { resources: ['r'], votes: cause.votes, attempts: 3, elapsed: 100, waitTimeout: 100 },
    { cause },
  );
  expect(classifyLockError(err)?.retryAfter).toBe(5);
});
