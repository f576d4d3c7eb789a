import { Timeline, monotonicNow } from '../base/clock';
import type { NodeVote } from '../base/errors';
import type { Lock } from '../lock/lock';
import { onAbort } from '../base/wake';
import { announcedDelay, heardOn } from './announced';
import { decline, newHandover } from './handover';
import { installed, unused } from './installed';
import { afterHolder, dropLine, keepOrDrop } from './kept-lines';
import type { LineTable } from './kept-lines';
import type { Handover } from './handover';
import {
  admitted,
  contended,
  enqueue,
  front,
  holdersEnd,
  promote,
  releasedBefore,
  sleepOn,
  unlink,
  watchAll,
} from '../waiting/lines';
import { defers, newLine, newTicket, othersWaited, waitingSince } from './queue-lines';
import type { Line, Ticket } from './queue-lines';
import type { GrantNews } from './queue-lines';
import type { AttemptResult } from '../waiting/attempt-result';
import type { LockContendedError, LockErrorDetail } from '../base/errors';
import type { ReleaseResult } from '../quorum/protocol';
import type { AttemptOutcome, Grant, ReleaseWatch } from '../store';
import type {
  FairAnnounced as Announced,
  FairAnnouncementListener,
  Reserved,
} from './fair-announcements';
import type { FairAttemptRequest, FairGrant, FairLockStore, FairRefusal } from './fair-store';
import { withFields } from '../base/fields';
import type { AttemptHints, WaitingPolicy } from '../waiting/waiting';
import { mustYield } from './streak';

/**
 * The engine's local queue: fairness and bounded work among the acquires of one process. It is
 * an efficiency layer only — the masters decide who holds a lock; nothing here is needed for
 * mutual exclusion.
 *
 * - **FIFO per resource.** Every retrying acquire joins the queue of each of its resources, in
 *   one global arrival order. A new `acquire()` queues behind the local waiters of its resources
 *   instead of barging past them.
 * - **Only admitted entries attempt.** An exclusive entry is admitted when it is first in the
 *   queue of every resource it asks for and no local exclusive holder of those resources is
 *   still valid. The others sleep without a timer of their own (their deadlines sit in one
 *   {@link Timeline}): a backlog of 10,000 waiters makes one attempt at a time, never a storm of
 *   attempts that miss their per-node timeouts.
 * - **No deadlock for multi-resource requests.** Entries are appended to all their queues at
 *   once, with increasing sequence numbers, so every queue is ordered by arrival. The waiter that
 *   arrived first of all those queued is first in every queue it is in, hence admitted: someone
 *   can always proceed.
 * - **Hand-off.** When a local holder releases (or loses) its lock, the head of each of its
 *   resources' queues is woken at once — no pub/sub round-trip, no timer. Its attempt goes out
 *   on each master's connection after the release that woke it, so it finds the key deleted.
 *   Releases by other processes arrive through the store's release announcements
 *   ({@link LockStore.watchReleases}: one watch per contended resource, not per waiter) and wake
 *   the head the same way; a head busy with an attempt meanwhile is "handed" it (no lost wake-up).
 * - **Fair across processes, ordered races** (the rules and why: fair/streak.ts). A process
 *   hands a resource to its own waiters at most MAX_INSTALL_STREAK times in a row while another
 *   engine watches it, MAX_LOCAL_STREAK while one polls for it (`mustYield`), then lets the
 *   others go first: told by a poll mark, by deferring to it; otherwise the yield is announced
 *   and the masters keep the resource for the engine that has waited longest (`RESERVE_MS`:
 *   ordered yields; each head waits `raceDelay` when the yield names nobody). The announcement
 *   names that engine: the other engines' heads do not attempt (fair/announced.ts `standBy`),
 *   their turns will be named. With installs (lib/core/fair/README.md), the named
 *   engine is granted by the yield itself: the grant goes to its head (fair/installed.ts).
 * - **Passes** (`announceAs`; lib/core/fair/README.md, "Passes"). A plain lock of one
 *   resource granted while other engines waited for it is released as a pass: like a yield, the
 *   masters give it to the engine that waited longest, but this engine does not join the order.
 * - **Kept queues** (fair/kept-lines.ts). The queue of a contended resource is kept while the
 *   exclusive holder it granted holds, so that the process's next acquire queues behind that
 *   holder and the streak counts on; and LINGER_MS after a lock that others waited for ended.
 *
 * Shared locks and semaphores join with `exclusive: false`: admitted when every entry before
 * them is non-exclusive. Hand-overs of plain locks: fair/handover.ts.
 */

export type { Ticket } from './queue-lines';

/** What the queue learns from an installed grant (another engine's yield or pass gave it). */
const INSTALLED: GrantNews = { installed: true };

/** See the file comment. One per engine (`fairness: 'across-processes'`). */
export class FairQueue implements LineTable, WaitingPolicy<Ticket> {
  readonly lines = new Map<string, Line>();
  private readonly tickets = new Set<Ticket>();
  readonly timeline = new Timeline();
  /**
   * Plain locks of one resource that other engines were seen waiting for when they were granted
   * (queue-lines.ts `othersWaited`): their release passes them to the one that waited longest.
   */
  readonly passes = new WeakSet<Lock>();
  private seq = 0;

  constructor(
    readonly store: FairLockStore,
    private readonly draining: AbortSignal,
  ) {
    onAbort(draining, () => this.wakeAll());
    // Hand-over across processes: an install's outcome (fair/installed.ts).
    store.onInstalled?.((r, grant) =>
      installed(this.lines.get(r), grant, draining.aborted, store, this.wakeStandingBy),
    );
  }

  /** Number of queued acquires (part of the engine's footprint). */
  get size(): number {
    return this.tickets.size;
  }

  /** Queues an acquire of `resources` behind the local entries already queued for them. */
  join(resources: readonly string[], exclusive: boolean, ttl?: number): Ticket {
    const ticket = newTicket(++this.seq, exclusive, resources.length, ttl);
    this.tickets.add(ticket);
    return enqueue(this.lines, ticket, resources, newLine);
  }

  admitted(ticket: Ticket): boolean {
    return admitted(ticket);
  }

  holdersEnd(ticket: Ticket): number {
    return holdersEnd(ticket);
  }

  contended(ticket: Ticket, detail: Omit<LockErrorDetail, 'votes'>): LockContendedError {
    return contended(ticket, detail);
  }

  /** A grant installed for `ticket` (fair/installed.ts), taken once; released when not usable. */
  takeGranted(ticket: Ticket, usable: boolean): Grant | undefined {
    const grant = ticket.installed;
    if (!grant) return undefined;
    ticket.installed = undefined;
    if (usable) return grant;
    unused(this.store, grant);
    return undefined;
  }

  /**
   * What `ticket`'s next attempt carries: a lock handed over by a local holder, taken over by it
   * (fair/handover.ts); after a yield to other engines' pollers, no free key they marked
   * (fair/streak.ts); ordered yields: since when this engine waits for the resource.
   */
  beforeAttempt(ticket: Ticket): AttemptHints | undefined {
    const handover = ticket.takeover;
    if (handover) ticket.takeover = undefined;
    const defer = !handover && defers(ticket);
    const waitSince = waitingSince(ticket);
    if (!handover && !defer && waitSince === undefined) return undefined;
    return {
      request: (req): FairAttemptRequest =>
        withFields(req, {
          handoverFrom: handover?.from,
          installedBy: handover?.installedBy,
          defer: defer ? true : undefined,
          waitSince,
        }),
      settle: handover ? (result) => handover.settle(result) : undefined,
      polls: defer,
    };
  }

  /**
   * Sleeps until `ticket` is woken (its turn, a release of one of its resources), `until`
   * (monotonic ms) passes, `signal` aborts or the engine drains. Returns at once when a release
   * was handed to it meanwhile.
   */
  sleep(ticket: Ticket, until: number, signal: AbortSignal | undefined): Promise<void> {
    decline(ticket); // a hand-over is taken by the next attempt or not at all
    if (ticket.installed) return Promise.resolve(); // taken by the loop's next turn
    return sleepOn(ticket, until, signal, this.draining, this.timeline);
  }

  /**
   * Ensures the release watches of `ticket`'s resources (after a contended attempt sent at
   * `sentAt`, monotonic ms). `fresh`: a watch became active — a master confirmed its
   * subscription — after the attempt was sent, so a release may have been missed (retry at
   * once); `live`: every resource's releases are announced (otherwise the waiter polls).
   */
  watch(ticket: Ticket, sentAt: number): Promise<{ fresh: boolean; live: boolean }> {
    return watchAll(ticket, sentAt, (line) => this.watchLine(line));
  }

  private watchLine(line: Line): Promise<ReleaseWatch | undefined> {
    if (line.watching) return line.watching;
    const heard: FairAnnouncementListener = (announced, token, repeat, reserved, install) =>
      heardOn(
        line,
        { announced, token, repeat, reserved, install },
        {
          owns: (t) => this.store.ownsToken?.(t),
          handOff: (a, r) => this.handOff(line, false, a, r),
        },
      );
    // A store without the fair mode's reading (the in-memory store) announces releases only.
    line.watching = (
      this.store.watchFairReleases
        ? this.store.watchFairReleases(line.resource, heard)
        : this.store.watchReleases(line.resource, heard)
    ).then((w) => {
      // The queue emptied meanwhile: nobody needs the watch any more.
      if (this.lines.get(line.resource) !== line) w?.stop();
      else line.watch = w;
      return w;
    });
    return line.watching;
  }

  /**
   * Records a contended attempt of `ticket` (its votes are reported to those who give up);
   * `heldBy`: the token of the one holder that refused it on a quorum, if any; `sentWall`: when
   * it was sent (wall ms), the engine's wait start if it had none (`Line.waitSince`).
   *
   * Returns what to do when a quorum of masters already announced that holder's release
   * (`Line.heard`): they ran this attempt before the release, and the announcements arrived
   * before the attempt's replies were read, so none may be left to wake the waiter, which would
   * sleep until the holder's keys expired — a whole ttl, although the resource is free.
   * `'retry'`: at once, the first time for that holder (the holder can no longer refuse it on a
   * quorum); `'poll'` after that (never a spin: the algorithm's retry delay, not the holder's
   * ttl). `undefined` otherwise — with fewer announcements, the masters still to run the release
   * announce it later, and those announcements wake a head refused by that holder.
   */
  refused(
    ticket: Ticket,
    votes: readonly NodeVote[],
    heldBy: string | undefined,
    sentWall?: number,
    outcome?: AttemptOutcome,
  ): 'retry' | 'poll' | undefined {
    let released: 'retry' | 'poll' | undefined;
    // The wait start the attempt sent (ordered yields: fair-store.ts `FairRefusal`), else when
    // it was sent: the engine's wait start.
    const since = (outcome as FairRefusal | undefined)?.waitSince ?? sentWall;
    for (const { line } of ticket.slots) {
      line.waitSince ??= since;
      line.votes = votes;
      line.heldBy = heldBy;
      line.streak = 0;
      line.yielding = false;
      line.lost++;
      if (heldBy !== undefined && this.store.ownsToken?.(heldBy) === false) {
        // Refused by another engine's plain lock: the masters raised this engine's poll mark,
        // and a yield to the pollers is over (one of them took the resource). Deferring longer
        // would make every engine that yielded defer to the mark of the one refused last.
        line.marked = true;
        line.deferring = false;
        // Ordered yields: a single-resource plain attempt entered this engine in the order.
        if (ticket.exclusive && ticket.slots.length === 1) line.ordered = true;
      }
      const r = releasedBefore(line, heldBy, this.store.quorum);
      if (r === 'poll' || released === undefined) released = r ?? released;
    }
    return released;
  }

  /**
   * `ticket` was granted `lock` (`news`: what the grant told, queue-lines.ts `GrantNews`): it is
   * the local holder now, and leaves the queue. Whether others waited is kept (`othersWaited`).
   */
  granted(ticket: Ticket, lock: Lock, result: AttemptResult | undefined): void {
    const news: GrantNews = (result?.lock && (result.grant as FairGrant)) || INSTALLED;
    if (othersWaited(ticket, news)) this.passes.add(lock);
    const { watchers } = news;
    const polled = news.polled ?? 0;
    for (const { line } of ticket.slots) {
      line.lingering = false;
      if (ticket.exclusive) line.holder = lock;
      line.heldBy = undefined;
      line.streak = ticket.local ? line.streak + 1 : 0;
      // A poll mark is another engine waiting, whether or not the masters count its watch.
      line.watchers = polled > 0 ? Math.max(watchers ?? Infinity, 2) : (watchers ?? Infinity);
      line.polled = polled;
      line.deferring = false;
      line.lost = 0;
      line.waitSince = undefined;
      line.ordered = false;
      // Others wait behind it: they may have to wait for a release announcement (streak).
      if (line.first !== line.last) void this.watchLine(line);
    }
    this.leave(ticket);
  }

  /** Removes `ticket` from its queues and wakes the entries that are admitted now. Idempotent. */
  leave(ticket: Ticket): void {
    if (ticket.left) return;
    ticket.left = true;
    decline(ticket);
    if (ticket.installed) {
      // Installed for it after its last turn (it gave up meanwhile): released like any lock.
      unused(this.store, ticket.installed);
      ticket.installed = undefined;
    }
    this.tickets.delete(ticket);
    ticket.wake?.();
    for (const slot of ticket.slots) {
      const line = slot.line;
      unlink(slot);
      if (line.first) promote(line);
      else keepOrDrop(this, line); // (fair/kept-lines.ts)
    }
  }

  /**
   * A lock of this engine ended (released by its holder, or lost): wakes the head of each of its
   * resources' queues at once (the streak's bound: streak.ts `mustYield`). Called before the
   * release is sent.
   */
  ended(lock: Lock): void {
    for (const resource of lock.resources) {
      const line = this.lines.get(resource);
      if (!line) continue;
      if (line.holder === lock) line.holder = undefined;
      this.handOff(line, true, 'release');
      if (!line.first && !line.holder) afterHolder(this, line, lock); // kept for it till now
    }
  }

  /** Hands `lock` (`grant`, its grant) to the next local waiter (handover.ts `handoverTo`). */
  handover(lock: Lock, grant: Grant): Handover | undefined {
    if (this.draining.aborted) return undefined;
    const { token, installedBy } = grant as FairGrant;
    return handoverTo(this.lines, lock, token, this.store, installedBy);
  }

  /** The release of `lock`, announced as {@link announceAs} says; every master is waited for. */
  release(lock: Lock, grant: Grant): Promise<ReleaseResult> {
    return this.store.release(grant, true, undefined, undefined, this.announceAs(lock));
  }

  /**
   * How the release of `lock` (its end was just reported: {@link ended}) is announced: `yield`
   * when its next local waiter yields to the waiters of other engines (the masters give the
   * resource to the one that waited longest; heads attempt in order when it names nobody:
   * fair/streak.ts `raceDelay`); `pass` when other engines waited for it when it was granted
   * ({@link passes}: the same without this engine joining the order); otherwise a plain
   * `release`. An ordered yield (one resource: fair-redis-store.ts) also enters this engine in the
   * order as far as its queue knows (`Line.ordered`), and marks the queue to take its entry off
   * when it ends (`marked`).
   */
  announceAs(lock: Lock): 'release' | 'yield' | 'pass' {
    for (const resource of lock.resources) {
      const line = this.lines.get(resource);
      if (line?.yielding && line.watchers > 1) {
        if (lock.resources.length === 1) line.ordered = line.marked = true;
        return 'yield';
      }
    }
    return this.passes.has(lock) ? 'pass' : 'release';
  }

  /** Wakes every sleeper (the engine drains or closes) and stops the timer. */
  close(): void {
    this.wakeAll();
    // Kept queues (fair/kept-lines.ts): their marks, parks and watches go now.
    for (const line of [...this.lines.values()]) if (!line.first) dropLine(this, line);
    this.timeline.clear();
  }
  private wakeAll(): void {
    for (const t of [...this.tickets]) t.wake?.();
  }

  /**
   * Wakes the admitted entries at the front of `line` after a release: a local one at once, an
   * announced one as fair/announced.ts says (`heard`: what was announced; `reserved`: the
   * yield named the engine the masters keep the key for).
   */
  private handOff(line: Line, local: boolean, heard: Announced, reserved?: Reserved): void {
    if (this.lines.get(line.resource) !== line) return;
    if (local && mustYield(line)) {
      // The streak ends (streak.ts): others go first. Told by a poll mark, the local waiters
      // defer to it until a poller took the resource (`refused`) or they are granted: they take
      // no free key while another engine's mark is up on it (fair/acquire-script.ts, ARGV[9]).
      if (line.polled > 0) {
        line.polled = 0;
        line.deferring = true;
      }
      if (line.watch?.live && !line.deferring) {
        line.yielding = true;
        return;
      }
      // Deferring (or no announcement will come): the head attempts now. Its deferred attempt
      // tells the engine deferred to that this one waits (fair/acquire-script.ts), before that
      // engine's holder could refuse it: waiting for the announcement first may take long
      // enough, on a loaded machine, for that holder's streak to run on unbounded.
      line.streak = 0;
      this.wakeFront(line, false);
      return;
    }
    if (!local) {
      const delay = announcedDelay(line, heard, reserved, this.timeline, this.wakeStandingBy);
      if (delay === undefined) return; // standing by (fair/announced.ts)
      if (delay > 0) {
        this.timeline.add(monotonicNow() + delay, () => this.wakeFront(line, false));
        return;
      }
    }
    this.wakeFront(line, local);
  }

  /** Wakes the front of `line` once it stood by long enough (fair/announced.ts). */
  private readonly wakeStandingBy = (line: Line): void => this.wakeFront(line, false);

  private wakeFront(line: Line, local: boolean): void {
    if (this.lines.get(line.resource) !== line) return;
    for (const t of front<Ticket>(line)) {
      if (t.wake) {
        t.local = local;
        t.wake();
      } else {
        t.handed = true; // busy with an attempt: its next sleep returns at once
      }
    }
  }
}

/**
 * Hands `lock` (a plain lock being released with `token`) to the next local waiter of `lines`
 * (the queue's): one that asks for exactly its resources as a
 * plain lock, sleeps, comes first in each of their queues, within the streak's bound
 * (streak.ts `mustYield`). It is woken to take the lock over in its next attempt. `undefined`
 * when none may (the release goes on as usual).
 */
function handoverTo(
  lines: ReadonlyMap<string, Line>,
  lock: Lock,
  token: string,
  store: FairLockStore,
  installedBy?: string,
): Handover | undefined {
  const t = lines.get(lock.resources[0])?.first?.ticket;
  if (!t?.wake || !t.exclusive || t.takeover || t.slots.length !== lock.resources.length) {
    return undefined;
  }
  for (const { line } of t.slots) {
    if (line.first?.ticket !== t || !lock.resources.includes(line.resource)) return undefined;
    if (line.holder && line.holder !== lock) return undefined;
    if (mustYield(line)) return undefined;
  }
  const handover = newHandover(token, store, installedBy);
  for (const { line } of t.slots) line.holder = undefined;
  t.takeover = handover;
  t.local = true;
  t.wake();
  return handover;
}
