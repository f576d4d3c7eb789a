/**
 * The quorum round and the protocol's decisions without Redis (pure logic): every pattern of
 * grant / refuse / timeout / error over 1–5 masters, for the mutex kind's quorum (a majority).
 */
import type { NodeOutcome } from '../../../lib/core/base/errors';
import { MUTEX } from '../../../lib/core/redis/kinds/mutex';
import { ReplyFormatError } from '../../../lib/core/redis/kinds/kind';
import type { AcquireAnswer } from '../../../lib/core/redis/kinds/kind';
import { FAIR_MUTEX } from '../../../lib/core/fair/fair-mutex';
import type { FairAcquireAnswer } from '../../../lib/core/fair/fair-mutex';
import {
  acquireVerdict,
  extendVerdict,
  mayHoldToken,
  releaseSummary,
  validUntil,
  validityAfter,
} from '../../../lib/core/quorum/protocol';
import { Timeline, driftFor } from '../../../lib/core/base/clock';
import { runRound } from '../../../lib/core/quorum/round';
import type { Voter } from '../../../lib/core/quorum/round';

type Answer = 'grant' | 'refuse' | 'timeout' | 'error';
const ANSWERS: readonly Answer[] = ['grant', 'refuse', 'timeout', 'error'];

function* patterns(n: number): Generator<Answer[]> {
  if (n === 0) {
    yield [];
    return;
  }
  for (const rest of patterns(n - 1)) for (const a of ANSWERS) yield [...rest, a];
}

const never = new Promise<never>(() => undefined);

/**
 * How a sender gives the round its answer: a promise, or delivered into the round's sink itself
 * (quorum/round.ts `VoteSink`, the hot path's `Dispatch.readInto`) — later, or during the send.
 */
type Delivery = 'promise' | 'sink later' | 'sink at once';

async function round(
  pattern: readonly Answer[],
  quorum: number,
  deadlines?: Timeline,
  lateVotes = false,
  delivery: Delivery = 'promise',
) {
  const masters: Voter[] = pattern.map((_, i) => ({ index: i, name: `m${i}` }));
  return runRound<Voter, boolean>({
    masters,
    quorum,
    timeout: 1,
    deadlines,
    lateVotes,
    send: (m, sink, i) => {
      const a = pattern[m.index];
      if (delivery !== 'promise') {
        const give = (): void => {
          if (a === 'error') sink.failed(i, new Error('ECONNREFUSED'));
          else if (a !== 'timeout') sink.answered(i, a === 'grant');
        };
        if (delivery === 'sink at once') give();
        else void Promise.resolve().then(give);
        return undefined;
      }
      if (a === 'timeout') return never;
      if (a === 'error') return Promise.reject(new Error('ECONNREFUSED'));
      return Promise.resolve(a === 'grant');
    },
    judge: (granted) => (granted ? 'ok' : 'held'),
    holderTtl: () => 1234,
    describeError: (err) => (err as Error).message,
  });
}

describe('one voting round, every pattern on 1–5 masters (majority quorum)', () => {
  // The round's timeout on its own setTimeout, and on a store's shared timeline (kept armed
  // between rounds: base/clock.ts `Timeline`) — the same verdicts either way.
  const shared = new Timeline(true);
  for (let n = 1; n <= 5; n++) {
    const quorum = MUTEX.quorum(n, Math.floor(n / 2) + 1);
    for (const [clock, deadlines, delivery] of [
      ['own timer', undefined, 'promise'],
      ['shared timeline', shared, 'promise'],
      ['own timer', undefined, 'sink later'],
      ['shared timeline', shared, 'sink at once'],
    ] as const)
      it(`${n} master(s), quorum ${quorum}: ${4 ** n} patterns (${clock}, answers by ${delivery})`, async () => {
        for (const pattern of patterns(n)) {
          const tally = await round(pattern, quorum, deadlines, false, delivery);
          const grants = pattern.filter((a) => a === 'grant').length;
          const verdict = acquireVerdict(tally.votes, tally.ok, quorum);
          // Granted exactly when a quorum granted: a refusal, timeout or error never counts, and
          // deciding early never loses a grant that was needed.
          expect([pattern, verdict === 'quorum']).toEqual([pattern, grants >= quorum]);
          expect(tally.ok).toBeLessThanOrEqual(grants);
          if (grants >= quorum) expect(tally.ok).toBeGreaterThanOrEqual(quorum);
          // Every master has exactly one vote, consistent with what it answered.
          expect(tally.votes).toHaveLength(n);
          tally.votes.forEach((v, i) => {
            const allowed: Record<Answer, NodeOutcome[]> = {
              grant: ['ok', 'pending'],
              refuse: ['held', 'pending'],
              timeout: ['timeout', 'pending'],
              error: ['error', 'pending'],
            };
            expect(allowed[pattern[i]]).toContain(v.outcome);
            expect(v.node).toBe(i);
            if (v.outcome === 'held') expect(v.holderTtl).toBe(1234);
            if (v.outcome === 'error') expect(v.error).toBe('ECONNREFUSED');
          });
          // Contended only when someone holds it (waiting can help); never for a pure outage.
          if (verdict === 'contended')
            expect(tally.votes.some((v) => v.outcome === 'held')).toBe(true);
          if (!pattern.includes('refuse')) expect(verdict).not.toBe('contended');
          // Masters are left pending only when the outcome was already certain without them.
          const pending = tally.votes.filter((v) => v.outcome === 'pending').length;
          const notOk = tally.votes.filter((v) => v.outcome !== 'ok' && v.outcome !== 'pending');
          if (pending > 0) {
            expect(tally.ok >= quorum || n - notOk.length < quorum).toBe(true);
          }
        }
      });
  }

  // lateVotes (a hand-over's take-over, fair/handover.ts): the same verdict, then every
  // master's final vote — whether the round was decided early, by every answer or by its timer.
  for (let n = 1; n <= 4; n++) {
    const quorum = MUTEX.quorum(n, Math.floor(n / 2) + 1);
    it(`lateVotes, ${n} master(s): the final votes are every answer, the verdict's votes unchanged`, async () => {
      const final: Record<Answer, NodeOutcome> = {
        grant: 'ok',
        refuse: 'held',
        timeout: 'timeout',
        error: 'error',
      };
      for (const pattern of patterns(n)) {
        const tally = await round(pattern, quorum, shared, true);
        const decided = tally.votes.map((v) => v.outcome);
        const votes = await tally.final;
        expect([pattern, votes?.map((v) => v.outcome)]).toEqual([
          pattern,
          pattern.map((a) => final[a]),
        ]);
        expect(tally.votes.map((v) => v.outcome)).toEqual(decided);
      }
      expect(shared.size).toBe(0); // no deadline left behind
    });
  }

  it('lateVotes: an answer after the verdict is in the final votes, not in the tally', async () => {
    const masters: Voter[] = [0, 1, 2].map((i) => ({ index: i, name: `m${i}` }));
    let answerLate!: (v: boolean) => void;
    const late = new Promise<boolean>((r) => (answerLate = r));
    const deadlines = new Timeline();
    const tally = await runRound<Voter, boolean>({
      masters,
      quorum: 2,
      timeout: 60_000,
      lateVotes: true,
      deadlines,
      send: (m) => (m.index === 2 ? late : Promise.resolve(true)),
      judge: (granted) => (granted ? 'ok' : 'held'),
      describeError: String,
    });
    expect(tally.votes.map((v) => v.outcome)).toEqual(['ok', 'ok', 'pending']);
    expect(deadlines.size).toBe(1); // still waiting for master 2, bounded by the timer
    answerLate(true);
    const votes = await tally.final;
    expect(votes?.map((v) => v.outcome)).toEqual(['ok', 'ok', 'ok']);
    expect(tally.votes[2].outcome).toBe('pending');
    expect(tally.replies[2]).toBeUndefined();
    expect(deadlines.size).toBe(0);
  });

  it('without lateVotes there is no final promise and no timer after the verdict', async () => {
    const masters: Voter[] = [0, 1, 2].map((i) => ({ index: i, name: `m${i}` }));
    const deadlines = new Timeline();
    const tally = await runRound<Voter, boolean>({
      masters,
      quorum: 2,
      timeout: 60_000,
      deadlines,
      send: (m) => (m.index === 2 ? never : Promise.resolve(true)),
      judge: () => 'ok',
      describeError: String,
    });
    expect(tally.final).toBeUndefined();
    expect(deadlines.size).toBe(0);
  });

  it('waitAll waits for every answer (release): nobody is pending', async () => {
    const masters: Voter[] = [0, 1, 2].map((i) => ({ index: i, name: `m${i}` }));
    const tally = await runRound<Voter, boolean>({
      masters,
      quorum: 2,
      timeout: 1000,
      waitAll: true,
      send: (m) => new Promise((resolve) => setImmediate(() => resolve(m.index !== 1))),
      judge: (deleted) => (deleted ? 'ok' : 'held'),
      describeError: String,
    });
    expect(tally.votes.map((v) => v.outcome)).toEqual(['ok', 'held', 'ok']);
    expect(releaseSummary(tally.votes, tally.ok)).toEqual({
      deleted: 2,
      complete: true,
      votes: tally.votes,
    });
  });

  it('decides as soon as a quorum granted: a silent master is pending, not waited for', async () => {
    const started = Date.now();
    const tally = await (async () => {
      const masters: Voter[] = [0, 1, 2].map((i) => ({ index: i, name: `m${i}` }));
      return runRound<Voter, boolean>({
        masters,
        quorum: 2,
        timeout: 60_000,
        send: (m) => (m.index === 2 ? never : Promise.resolve(true)),
        judge: () => 'ok',
        describeError: String,
      });
    })();
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(tally.votes.map((v) => v.outcome)).toEqual(['ok', 'ok', 'pending']);
  });

  it('a sink counts one answer per master: a second delivery changes nothing', async () => {
    const masters: Voter[] = [0, 1, 2].map((i) => ({ index: i, name: `m${i}` }));
    const tally = await runRound<Voter, boolean>({
      masters,
      quorum: 2,
      timeout: 1000,
      waitAll: true,
      send: (_m, sink, i) => {
        sink.answered(i, i !== 1);
        sink.answered(i, true); // ignored: master 1 refused
        sink.failed(i, new Error('late')); // ignored
        return undefined;
      },
      judge: (granted) => (granted ? 'ok' : 'held'),
      describeError: (err) => (err as Error).message,
    });
    expect(tally.votes.map((v) => v.outcome)).toEqual(['ok', 'held', 'ok']);
    expect(tally.ok).toBe(2);
  });

  it('a send that throws synchronously is an error vote, not a crash', async () => {
    const tally = await runRound<Voter, boolean>({
      masters: [{ index: 0, name: 'm0' }],
      quorum: 1,
      timeout: 1000,
      send: () => {
        throw new Error('boom');
      },
      judge: () => 'ok',
      describeError: (err) => (err as Error).message,
    });
    expect(tally.votes[0]).toMatchObject({ outcome: 'error', error: 'boom' });
  });
});

describe('protocol decisions', () => {
  it('validity = ttl − elapsed − drift, drift = ttl × driftFactor + 2 ms', () => {
    expect(driftFor(10_000, 0.01)).toBe(102);
    expect(validityAfter(10_000, 1000, 1500, 0.01)).toBe(10_000 - 500 - 102);
    expect(validUntil(1000, 10_000, 0.01)).toBe(1000 + 10_000 - 102);
    expect(validityAfter(100, 0, 99, 0)).toBeLessThan(0);
  });

  it('extension: extended only with a quorum inside the old deadline and validity left', () => {
    const base = { masters: 5, quorum: 3, blocked: 0, end: 10, deadline: 100, validity: 50 };
    expect(extendVerdict({ ...base, ok: 3 })).toBe('extended');
    expect(extendVerdict({ ...base, ok: 3, end: 100 })).toBe('expired');
    expect(extendVerdict({ ...base, ok: 3, validity: 0 })).toBe('validity-exhausted');
    expect(extendVerdict({ ...base, ok: 2 })).toBe('unavailable');
    // Three masters hold another token (or one put back): a quorum can no longer hold ours.
    expect(extendVerdict({ ...base, ok: 2, blocked: 3 })).toBe('lost');
    expect(extendVerdict({ ...base, ok: 2, blocked: 2 })).toBe('unavailable');
  });

  it('a failed attempt is cleaned up wherever the token may be set', () => {
    const vote = (outcome: NodeOutcome) => ({ node: 0, name: 'm', outcome, latency: 0 });
    for (const o of ['ok', 'quarantined', 'timeout', 'error', 'pending'] as const) {
      expect(mayHoldToken(vote(o), false)).toBe(true);
    }
    expect(mayHoldToken(vote('held'), false)).toBe(false);
    expect(mayHoldToken(vote('held'), true)).toBe(true); // slot groups may have succeeded
  });
});

describe('the mutex kind reads replies, never guessing', () => {
  const one = (value: unknown, resources = ['a']) => [{ resources, value }];

  it('granted with fencing counters, in the order of the lock resources across slot groups', () => {
    const answer = MUTEX.readAcquire(
      [
        { resources: ['b'], value: [1, 5000, 7] },
        { resources: ['a'], value: [1, -1, 3] },
      ],
      ['a', 'b'],
    );
    expect(answer).toEqual({
      granted: true,
      markerAge: 5000,
      holderTtl: undefined,
      counters: [3, 7],
    });
  });

  it('the fair mutex: granted while other engines wait in the order, status 2, on one group or any of several', () => {
    const fair = (a: AcquireAnswer): FairAcquireAnswer => a;
    expect(FAIR_MUTEX.readAcquire(one([2, -1, 4]), ['a'])).toEqual({
      granted: true,
      markerAge: undefined,
      holderTtl: undefined,
      counters: [4],
      othersWait: true,
    });
    expect(fair(FAIR_MUTEX.readAcquire(one([1, -1, 4]), ['a'])).othersWait).toBeFalsy();
    const groups = [
      { resources: ['b'], value: [1, -1, 7] },
      { resources: ['a'], value: [2, -1, 3] },
    ];
    expect(FAIR_MUTEX.readAcquire(groups, ['a', 'b'])).toMatchObject({
      counters: [3, 7],
      othersWait: true,
    });
    // Not granted (one group refused): nobody's wait is reported.
    const refused = [groups[1], { resources: ['b'], value: [0, -1, 900] }];
    expect(fair(FAIR_MUTEX.readAcquire(refused, ['a', 'b'])).othersWait).toBeFalsy();
  });

  it('the plain mutex refuses status 2 (only the fair acquire sends it)', () => {
    expect(() => MUTEX.readAcquire(one([2, -1, 4]), ['a'])).toThrow(ReplyFormatError);
  });

  it('refused: the holder ttl of the first refused group', () => {
    expect(MUTEX.readAcquire(one([0, -1, 900]), ['a'])).toMatchObject({
      granted: false,
      holderTtl: 900,
      counters: undefined,
    });
  });

  it('refused across slot groups: the holder only when every refused group names the same one', () => {
    const groups = (...values: unknown[]) =>
      values.map((value, i) => ({ resources: [`r${i}`], value }));
    const read = (...values: unknown[]) =>
      MUTEX.readAcquire(
        groups(...values),
        values.map((_, i) => `r${i}`),
      );
    expect(read([0, -1, 900, 'tok-a']).holder).toBe('tok-a'); // a Cluster master, one slot
    expect(read([0, -1, 900, 'tok-a'], [1, -1], [0, -1, 800, 'tok-a']).holder).toBe('tok-a');
    expect(read([0, -1, 900, 'tok-a'], [0, -1, 800, 'tok-b']).holder).toBeUndefined();
    expect(read([0, -1, 900, 'tok-a'], [0, -1, 800]).holder).toBeUndefined(); // readers
    expect(read([0, -1, 900], [0, -1, 800, 'tok-a']).holder).toBeUndefined();
    expect(read([0, -1, 900, 'tok-a'], [-1, -1, 50, 'semaphore', 3]).holder).toBeUndefined();
    expect(read([1, -1], [1, -1]).holder).toBeUndefined();
  });

  it('another type at a key, not asked again among the kinds: a refusal naming no holder', () => {
    expect(MUTEX.readAcquire(one([-3, -2]), ['a'])).toEqual({
      granted: false,
      markerAge: undefined,
      holderTtl: undefined,
      counters: undefined,
      holder: undefined,
    });
    expect(() => MUTEX.readAcquire(one([-3, -1, 5]), ['a'])).toThrow(ReplyFormatError);
  });

  it('a malformed reply is an error, not a grant', () => {
    for (const bad of [null, 'OK', [3, 0], [1], {}]) {
      expect(() => MUTEX.readAcquire(one(bad), ['a'])).toThrow(ReplyFormatError);
    }
  });

  it('extension and release replies', () => {
    expect(MUTEX.readExtend(one(1), false).status).toBe('kept');
    expect(MUTEX.readExtend(one(0), false).status).toBe('held');
    expect(MUTEX.readExtend(one([2, 10]), true)).toEqual({ status: 'repaired', markerAge: 10 });
    expect(MUTEX.readExtend(one([0, -1]), true).status).toBe('held');
    expect(MUTEX.readRelease(one(0))).toBe(false);
    expect(MUTEX.readRelease(one(1))).toBe(true);
  });
});
