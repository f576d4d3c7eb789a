import { afterPendingIo, monotonicNow } from '../base/clock';
import { withFields } from '../base/fields';
import type { NodeOutcome, NodeVote } from '../base/errors';
import type { Timeline } from '../base/clock';

/**
 * One voting round of the Redlock algorithm (docs/REDLOCK.md, "N masters", step 2):
 * the same request goes to every master **in parallel**, each answer becomes a vote, and the
 * round ends as soon as its outcome is certain — a quorum of `ok`, or so many other answers that
 * no quorum is possible — or when the one timer of the round fires (every master gets the same
 * per-node timeout). Masters that had not answered are recorded as `timeout` (the timer fired,
 * and the replies already waiting in the sockets were read: a reply that came in time is never a
 * timeout because the event loop was busy) or `pending` (decided without them). Late answers
 * are ignored.
 *
 * Nothing here knows Redis, Lua, retries or locks: `send` and `judge` are given by the caller.
 */

/** One master's reply to one request of a round (already decoded by the caller's `send`). */
export type Reply<T> =
  | { readonly kind: 'reply'; readonly value: T; readonly latency: number }
  | { readonly kind: 'error'; readonly error: string; readonly latency: number }
  | { readonly kind: 'timeout'; readonly latency: number };

/** A participant of a round: its position and redacted name (for the votes). */
export interface Voter {
  readonly index: number;
  readonly name: string;
}

/** The verdict of a round: one vote per master, the raw replies and the number of `ok` votes. */
export interface Tally<T> {
  /** One vote per master (the round's owner may annotate them, e.g. quarantine time left). */
  readonly votes: NodeVote[];
  readonly replies: readonly (Reply<T> | undefined)[];
  readonly ok: number;
  /**
   * With `lateVotes` only: every master's vote once each answered or the round's timer fired —
   * `votes` with the `pending` ones replaced by the late answers (or `timeout`). Never rejects.
   */
  readonly final?: Promise<readonly NodeVote[]>;
}

/** How a round is run. */
export interface RoundSpec<M extends Voter, T> {
  readonly masters: readonly M[];
  /** `ok` votes that decide the round. */
  readonly quorum: number;
  /** Per-node timeout in ms (one timer for the whole round). */
  readonly timeout: number;
  /** Sends the request to one master; resolves with its decoded reply. */
  send(master: M): Promise<T>;
  /** Turns a reply into a vote. */
  judge(value: T, master: M): NodeOutcome;
  /** For `held` votes: the holder's remaining ttl, when the reply tells it. */
  holderTtl?(value: T): number | undefined;
  /** Turns a rejection into a message (credentials removed). */
  describeError(err: unknown): string;
  /** Wait for every master (or the timer) instead of deciding early. Default `false`. */
  readonly waitAll?: boolean;
  /**
   * Decide as usual, then keep reading the masters that were still pending until they answer or
   * the timer fires, into {@link Tally.final}. Default `false`.
   */
  readonly lateVotes?: boolean;
  /**
   * Where the round's timeout is scheduled: a shared {@link Timeline} (the store's, one timer for
   * every round), or its own `setTimeout` when absent.
   */
  readonly deadlines?: Timeline;
}

/** Runs one round (see the file comment). Never rejects. */
export function runRound<M extends Voter, T>(spec: RoundSpec<M, T>): Promise<Tally<T>> {
  const { masters, quorum } = spec;
  const n = masters.length;
  const votes = new Array<NodeVote>(n);
  const replies = new Array<Reply<T> | undefined>(n).fill(undefined);
  const start = monotonicNow();
  let ok = 0;
  let notOk = 0;
  let decided = false;
  // lateVotes: the votes after the verdict (a copy: the tally's own never change), and when done.
  let late: NodeVote[] | undefined;
  let lateLeft = 0; // pending masters not yet answered
  let settleFinal: ((votes: readonly NodeVote[]) => void) | undefined;
  return new Promise<Tally<T>>((resolve) => {
    const stopTimer = (): void => {
      if (entry) deadlines?.remove(entry);
      else clearTimeout(timer);
    };
    const finish = (): void => {
      if (decided) return;
      decided = true;
      let pending = 0;
      for (let i = 0; i < n; i++) {
        if (votes[i]) continue;
        votes[i] = vote(masters[i], 'pending', 0);
        pending++;
      }
      if (!spec.lateVotes || pending === 0) stopTimer();
      if (!spec.lateVotes) return resolve({ votes, replies, ok });
      late = votes.slice();
      lateLeft = pending;
      const final =
        pending === 0
          ? Promise.resolve<readonly NodeVote[]>(late)
          : new Promise<readonly NodeVote[]>((r) => (settleFinal = r));
      resolve({ votes, replies, ok, final });
    };
    const timedOut = (): void => {
      const latency = monotonicNow() - start;
      if (decided) {
        // (lateVotes) The masters still pending never answered in time.
        if (!late || !settleFinal) return;
        for (let i = 0; i < n; i++) {
          if (late[i].outcome === 'pending') late[i] = vote(masters[i], 'timeout', latency);
        }
        settleFinal(late);
        settleFinal = undefined;
        return;
      }
      for (let i = 0; i < n; i++) {
        if (replies[i]) continue;
        replies[i] = { kind: 'timeout', latency };
        votes[i] = vote(masters[i], 'timeout', latency);
      }
      finish();
    };
    // Replies already in the sockets are read first (base/clock.ts, afterPendingIo).
    const expired = (): void => afterPendingIo(timedOut);
    const timeout = Math.max(1, spec.timeout);
    const { deadlines } = spec;
    const entry = deadlines?.add(start + timeout, expired);
    const timer = entry ? undefined : setTimeout(expired, timeout);
    const judged = (i: number, reply: Reply<T>): NodeVote => {
      const master = masters[i];
      const outcome = reply.kind === 'reply' ? spec.judge(reply.value, master) : reply.kind;
      if (reply.kind === 'error')
        return withFields(vote(master, outcome, reply.latency), { error: reply.error });
      if (outcome === 'held' && reply.kind === 'reply' && spec.holderTtl) {
        const ttl = spec.holderTtl(reply.value);
        if (ttl !== undefined)
          return withFields(vote(master, outcome, reply.latency), { holderTtl: ttl });
      }
      return vote(master, outcome, reply.latency);
    };
    const record = (i: number, reply: Reply<T>): void => {
      if (decided) {
        // (lateVotes) A late answer: into the final votes, the tally's stay as they were.
        if (!late || !settleFinal || late[i].outcome !== 'pending') return;
        late[i] = judged(i, reply);
        if (--lateLeft === 0) {
          stopTimer();
          settleFinal(late);
          settleFinal = undefined;
        }
        return;
      }
      replies[i] = reply;
      const v = judged(i, reply);
      votes[i] = v;
      if (v.outcome === 'ok') ok++;
      else notOk++;
      if (ok + notOk === n || (!spec.waitAll && (ok >= quorum || n - notOk < quorum))) finish();
    };
    for (let i = 0; i < n; i++) {
      let sent: Promise<T>;
      try {
        sent = spec.send(masters[i]);
      } catch (err) {
        sent = Promise.reject(err);
      }
      sent.then(
        (value) => record(i, { kind: 'reply', value, latency: monotonicNow() - start }),
        (err: unknown) =>
          record(i, {
            kind: 'error',
            error: spec.describeError(err),
            latency: monotonicNow() - start,
          }),
      );
    }
  });
}

function vote(master: Voter, outcome: NodeOutcome, latency: number): NodeVote {
  return { node: master.index, name: master.name, outcome, latency: round2(latency) };
}

function round2(ms: number): number {
  return Math.round(ms * 100) / 100;
}
