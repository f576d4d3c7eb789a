import { afterPendingIo, monotonicNow } from '../base/clock';
import { withFields } from '../base/fields';
import type { NodeOutcome, NodeVote } from '../base/errors';
import type { Timeline, TimelineEntry } from '../base/clock';

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

/**
 * Where a sender that delivers a master's answer itself puts it (see {@link RoundSpec.send}): the
 * round's own record, without a promise and two callbacks of the round's per master.
 */
export interface VoteSink<T> {
  /** Master `i` (its position in the round) answered `value`. */
  answered(i: number, value: T): void;
  /** Master `i`'s request failed with `err`. */
  failed(i: number, err: unknown): void;
}

/** How a round is run. */
export interface RoundSpec<M extends Voter, T> {
  readonly masters: readonly M[];
  /** `ok` votes that decide the round. */
  readonly quorum: number;
  /** Per-node timeout in ms (one timer for the whole round). */
  readonly timeout: number;
  /**
   * Sends the request to one master (the `i`-th); resolves with its decoded reply — or returns
   * `undefined`, having taken on to deliver the answer to `sink` itself: exactly once, at any time
   * from this call on (even during it), never by throwing.
   */
  send(master: M, sink: VoteSink<T>, i: number): Promise<T> | undefined;
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
  return new Promise<Tally<T>>((resolve) => new Round(spec, resolve).start());
}

/**
 * The state of one running round: fields and methods rather than a closure per step, so a
 * round allocates little besides its votes (two continuations per master).
 */
class Round<M extends Voter, T> implements VoteSink<T> {
  private readonly n: number;
  private readonly votes: NodeVote[];
  private readonly replies: (Reply<T> | undefined)[];
  private readonly began = monotonicNow();
  private ok = 0;
  private notOk = 0;
  private decided = false;
  /** lateVotes: the votes after the verdict (a copy: the tally's own never change). */
  private late: NodeVote[] | undefined = undefined;
  /** lateVotes: pending masters not yet answered. */
  private lateLeft = 0;
  private settleFinal: ((votes: readonly NodeVote[]) => void) | undefined = undefined;
  private entry: TimelineEntry | undefined = undefined;
  private timer: NodeJS.Timeout | undefined = undefined;

  constructor(
    private readonly spec: RoundSpec<M, T>,
    private readonly resolve: (tally: Tally<T>) => void,
  ) {
    this.n = spec.masters.length;
    this.votes = unset<NodeVote>(this.n);
    this.replies = unset<Reply<T>>(this.n);
  }

  start(): void {
    const { spec, n, began } = this;
    const timeout = Math.max(1, spec.timeout);
    if (spec.deadlines) this.entry = spec.deadlines.add(began + timeout, this.expired);
    else this.timer = setTimeout(this.expired, timeout);
    for (let i = 0; i < n; i++) {
      let sent: Promise<T> | undefined;
      try {
        sent = spec.send(spec.masters[i], this, i);
      } catch (err) {
        sent = Promise.reject(err);
      }
      sent?.then(
        (value) => this.answered(i, value),
        (err: unknown) => this.failed(i, err),
      );
    }
  }

  answered(i: number, value: T): void {
    this.record(i, { kind: 'reply', value, latency: monotonicNow() - this.began });
  }

  failed(i: number, err: unknown): void {
    const error = this.spec.describeError(err);
    this.record(i, { kind: 'error', error, latency: monotonicNow() - this.began });
  }

  private stopTimer(): void {
    if (this.entry) this.spec.deadlines?.remove(this.entry);
    else clearTimeout(this.timer);
  }

  private finish(): void {
    if (this.decided) return;
    this.decided = true;
    const { votes, replies, ok, n, spec } = this;
    let pending = 0;
    for (let i = 0; i < n; i++) {
      if (votes[i]) continue;
      votes[i] = vote(spec.masters[i], 'pending', 0);
      pending++;
    }
    if (!spec.lateVotes || pending === 0) this.stopTimer();
    if (!spec.lateVotes) return this.resolve({ votes, replies, ok });
    const late = (this.late = votes.slice());
    this.lateLeft = pending;
    const final =
      pending === 0
        ? Promise.resolve<readonly NodeVote[]>(late)
        : new Promise<readonly NodeVote[]>((r) => (this.settleFinal = r));
    this.resolve({ votes, replies, ok, final });
  }

  // Replies already in the sockets are read first (base/clock.ts, afterPendingIo).
  private readonly expired = (): void => afterPendingIo(this.timedOut);

  private readonly timedOut = (): void => {
    const { n, spec, late } = this;
    const latency = monotonicNow() - this.began;
    if (this.decided) {
      // (lateVotes) The masters still pending never answered in time.
      if (!late || !this.settleFinal) return;
      for (let i = 0; i < n; i++) {
        if (late[i].outcome === 'pending') late[i] = vote(spec.masters[i], 'timeout', latency);
      }
      this.settleFinal(late);
      this.settleFinal = undefined;
      return;
    }
    for (let i = 0; i < n; i++) {
      if (this.replies[i]) continue;
      this.replies[i] = { kind: 'timeout', latency };
      this.votes[i] = vote(spec.masters[i], 'timeout', latency);
    }
    this.finish();
  };

  private judged(i: number, reply: Reply<T>): NodeVote {
    const { spec } = this;
    const master = spec.masters[i];
    const outcome = reply.kind === 'reply' ? spec.judge(reply.value, master) : reply.kind;
    if (reply.kind === 'error')
      return withFields(vote(master, outcome, reply.latency), { error: reply.error });
    if (outcome === 'held' && reply.kind === 'reply' && spec.holderTtl) {
      const ttl = spec.holderTtl(reply.value);
      if (ttl !== undefined)
        return withFields(vote(master, outcome, reply.latency), { holderTtl: ttl });
    }
    return vote(master, outcome, reply.latency);
  }

  private record(i: number, reply: Reply<T>): void {
    if (this.decided) {
      // (lateVotes) A late answer: into the final votes, the tally's stay as they were.
      const { late } = this;
      if (!late || !this.settleFinal || late[i].outcome !== 'pending') return;
      late[i] = this.judged(i, reply);
      if (--this.lateLeft === 0) {
        this.stopTimer();
        this.settleFinal(late);
        this.settleFinal = undefined;
      }
      return;
    }
    if (this.replies[i]) return; // (one answer per master)
    this.replies[i] = reply;
    const v = this.judged(i, reply);
    this.votes[i] = v;
    if (v.outcome === 'ok') this.ok++;
    else this.notOk++;
    const { ok, notOk, n } = this;
    const { quorum, waitAll } = this.spec;
    if (ok + notOk === n || (!waitAll && (ok >= quorum || n - notOk < quorum))) this.finish();
  }
}

/**
 * `n` empty slots (`undefined` until a vote or reply fills them), made to hold any value at
 * once: `new Array(n)` alone holds small integers until the first object converts it, and
 * `fill` runs in the runtime.
 */
function unset<E>(n: number): E[] {
  const slots = new Array<E | undefined>(n);
  for (let i = 0; i < n; i++) slots[i] = undefined;
  return slots as E[];
}

function vote(master: Voter, outcome: NodeOutcome, latency: number): NodeVote {
  return { node: master.index, name: master.name, outcome, latency: round2(latency) };
}

function round2(ms: number): number {
  return Math.round(ms * 100) / 100;
}
