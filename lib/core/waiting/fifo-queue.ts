import type { NodeVote } from '../base/errors';
import type { LockErrorDetail, LockContendedError } from '../base/errors';
import type { Lock } from '../lock/lock';
import { onAbort } from '../base/wake';
import {
  admitted,
  contended,
  countHeard,
  enqueue,
  front,
  holderUntil,
  holdersEnd,
  newBaseLine,
  promote,
  releasedBefore,
  sleepOn,
  unlink,
  watchAll,
} from './lines';
import type { Line, Slot, Ticket } from './lines';
import type { Announced, LockStore, ReleaseWatch } from '../store';
import type { WaitingPolicy } from './waiting';
import { Timeline, monotonicNow } from '../base/clock';
import { engineOf } from '../base/token';

/** What a line that watches nothing gets (see `FifoQueue.watchLine`). */
const NO_WATCH: Promise<undefined> = Promise.resolve(undefined);

/**
 * The default waiting policy (`fairness: 'local'`; the seam: waiting/waiting.ts): the acquires
 * of one process wait in the order they came, and only the front of a resource's line attempts.
 * An efficiency layer only — the masters decide who holds a lock.
 *
 * - **FIFO per resource.** Every retrying acquire joins the line of each of its resources, in
 *   one global arrival order (waiting/lines.ts). A new `acquire()` queues behind the local
 *   waiters of its resources instead of barging past them.
 * - **Only admitted entries attempt.** An exclusive entry is admitted when it is first in the
 *   line of every resource it asks for and no local exclusive holder of those resources is still
 *   valid; a shared one when no exclusive entry comes before it. The others sleep without a
 *   timer of their own (their deadlines sit in one {@link Timeline}): a backlog of 10,000 waiters
 *   makes one attempt at a time, never a storm of attempts that miss their per-node timeouts.
 * - **No deadlock for multi-resource requests.** Entries are appended to all their lines at once
 *   with increasing sequence numbers: the waiter that arrived first of all those queued is first
 *   in every line it is in, hence admitted.
 * - **Wake-ups.** A local release (or loss) wakes the front of its resources' lines at once; its
 *   attempt goes out on each master's connection after the release that woke it. Releases by
 *   other processes arrive through the store's release announcements
 *   ({@link LockStore.watchReleases}: one watch per contended resource, not per waiter); a head
 *   busy with an attempt meanwhile is "handed" it (no lost wake-up). A head refused by two
 *   holders of one other engine in a row (that engine hands the resource to waiters of its
 *   own) polls at the random retry delay instead, until a refusal names another engine's
 *   holder: no futile attempt per lock. Its line stops watching meanwhile (a new watch comes
 *   with the refusal that ends the polling): the masters do not send every release to each
 *   polling process — with several of them, those deliveries woke every process at every
 *   release and slowed the rounds of the one handing the resource on.
 * - **Kept lines.** The line of a contended resource is kept while the exclusive holder it
 *   granted holds, so that the process's next acquire waits behind that holder instead of
 *   attempting against its keys.
 */
export class FifoQueue implements WaitingPolicy<Ticket> {
  private readonly lines = new Map<string, Line>();
  private readonly tickets = new Set<Ticket>();
  private readonly timeline = new Timeline();
  private seq = 0;

  constructor(
    private readonly store: LockStore,
    private readonly draining: AbortSignal,
  ) {
    onAbort(draining, () => this.wakeAll());
  }

  get size(): number {
    return this.tickets.size;
  }

  join(resources: readonly string[], exclusive: boolean): Ticket {
    const ticket: Ticket = {
      seq: ++this.seq,
      exclusive,
      // Sized once (a pushed-to array reserves room for 16 more): 10,000 waiters' memory.
      slots: new Array<Slot>(resources.length),
      wake: undefined,
      handed: false,
      left: false,
    };
    this.tickets.add(ticket);
    return enqueue(this.lines, ticket, resources, newBaseLine);
  }

  admitted(ticket: Ticket): boolean {
    return admitted(ticket);
  }

  holdersEnd(ticket: Ticket): number {
    return holdersEnd(ticket);
  }

  sleep(ticket: Ticket, until: number, signal: AbortSignal | undefined): Promise<void> {
    return sleepOn(ticket, until, signal, this.draining, this.timeline);
  }

  refused(
    ticket: Ticket,
    votes: readonly NodeVote[],
    heldBy: string | undefined,
  ): 'retry' | 'poll' | undefined {
    let released: 'retry' | 'poll' | undefined;
    for (const { line } of ticket.slots) {
      // Refused by one engine's holder, then by another holder of the same engine: it handed
      // the resource to a waiter of its own (its queue does; nothing orders processes in this
      // mode — the fair mode does). Each of its next releases would wake the head for another
      // refusal: one futile attempt per lock and waiting process. The head polls instead, at
      // the algorithm's random delay, and the line stops watching the resource's releases,
      // until a refusal names another engine's holder.
      // (Refused twice by the same holder is not a hand-over: the release had not reached
      // every master yet, and their announcements wake the head. Split votes, no holder on a
      // quorum — that engine's old and new holder on different masters, say — change nothing.)
      const from = heldBy === undefined ? undefined : engineOf(heldBy);
      const before = line.heldBy;
      const handing =
        from !== undefined &&
        (from === line.deafTo ||
          (before !== undefined && heldBy !== before && from === engineOf(before)));
      if (handing) {
        if (line.deafTo === undefined) this.unwatch(line);
        line.deafTo = from;
        // Woken meanwhile by that engine's release, heard before this refusal: not a reason
        // to attempt at once.
        ticket.handed = false;
      } else if (heldBy !== undefined) line.deafTo = undefined;
      line.votes = votes;
      line.heldBy = heldBy;
      // (A holder whose release a quorum already announced: retried at once all the same.)
      const r =
        releasedBefore(line, heldBy, this.store.quorum) ??
        (line.deafTo !== undefined ? 'poll' : undefined);
      if (r === 'poll' || released === undefined) released = r ?? released;
    }
    return released;
  }

  watch(ticket: Ticket, sentAt: number): Promise<{ fresh: boolean; live: boolean }> {
    return watchAll(ticket, sentAt, (line) => this.watchLine(line));
  }

  granted(ticket: Ticket, lock: Lock): void {
    for (const { line } of ticket.slots) {
      if (ticket.exclusive) line.holder = lock;
      line.heldBy = undefined;
      line.deafTo = undefined;
    }
    this.leave(ticket);
  }

  leave(ticket: Ticket): void {
    if (ticket.left) return;
    ticket.left = true;
    this.tickets.delete(ticket);
    ticket.wake?.();
    for (const slot of ticket.slots) {
      unlink(slot);
      if (slot.line.first) promote(slot.line);
      else this.keepOrDrop(slot.line);
    }
  }

  contended(ticket: Ticket, detail: Omit<LockErrorDetail, 'votes'>): LockContendedError {
    return contended(ticket, detail);
  }

  ended(lock: Lock): void {
    for (const resource of lock.resources) {
      const line = this.lines.get(resource);
      if (!line) continue;
      if (line.holder === lock) line.holder = undefined;
      this.wakeFront(line);
      if (!line.first && !line.holder) this.drop(line);
    }
  }

  close(): void {
    this.wakeAll();
    for (const line of [...this.lines.values()]) if (!line.first) this.drop(line);
    this.timeline.clear();
  }

  private wakeAll(): void {
    for (const t of [...this.tickets]) t.wake?.();
  }

  private watchLine(line: Line): Promise<ReleaseWatch | undefined> {
    // A line that polls a handing engine needs no announcements (see `refused`).
    if (line.deafTo !== undefined) return NO_WATCH;
    if (line.watching) return line.watching;
    const watching = this.store
      .watchReleases(line.resource, (announced, token, repeat) =>
        this.heard(line, announced, token, repeat),
      )
      .then((w) => {
        // The line ended, or stopped watching, meanwhile: nobody needs the watch any more.
        if (this.lines.get(line.resource) !== line || line.watching !== watching) w?.stop();
        else line.watch = w;
        return w;
      });
    line.watching = watching;
    return watching;
  }

  /** Stops the line's release watch (a new one is made when a refusal needs it again). */
  private unwatch(line: Line): void {
    line.watch?.stop();
    line.watch = undefined;
    line.watching = undefined;
  }

  /** One master's release announcement of `line`'s resource (redis/masters/handoff.ts). */
  private heard(line: Line, announced: Announced, token: string, repeat: boolean): void {
    if (announced !== 'cleanup') countHeard(line, token);
    // A polling line holds no watch; this is one being stopped (see `refused`).
    if (line.deafTo !== undefined) return;
    if (repeat) {
      // Another master announces a release already heard. It matters to a head refused by that
      // very holder: its attempt, woken by the first announcement, reached masters where the
      // release had not run yet (a slow master). Without this it would sleep until the holder's
      // key expired elsewhere — a whole ttl.
      if (token === line.heldBy) this.wakeFront(line);
      return;
    }
    // A clean-up of another engine's failed attempt does not wake a head that one holder
    // refused on a quorum (only that holder's release frees the resource) — unless it is that
    // holder's own: a failed attempt with a quorum but no validity left, whose keys are gone.
    if (announced === 'cleanup' && line.heldBy !== undefined && token !== line.heldBy) return;
    this.wakeFront(line);
  }

  private wakeFront(line: Line): void {
    if (this.lines.get(line.resource) !== line) return;
    for (const t of front(line)) {
      if (t.wake) t.wake();
      else t.handed = true; // busy with an attempt: its next sleep returns at once
    }
  }

  /**
   * `line` has no entries left: keeps it while the exclusive holder it granted holds, when its
   * resource was contended (it has a release watch), or drops it. A kept line is dropped when
   * the holder ends ({@link ended}) or at its validity end (a lock left to expire).
   */
  private keepOrDrop(line: Line): void {
    const now = monotonicNow();
    const until = line.watching ? holderUntil(line, now) : -Infinity;
    if (!(until > now)) return this.drop(line);
    if (line.kept) this.timeline.remove(line.kept);
    line.kept = this.timeline.add(until, () => {
      line.kept = undefined;
      if (line.first || this.lines.get(line.resource) !== line) return;
      if (holderUntil(line, monotonicNow()) === -Infinity) this.drop(line);
    });
  }

  private drop(line: Line): void {
    if (line.kept) this.timeline.remove(line.kept);
    line.kept = undefined;
    if (this.lines.get(line.resource) === line) this.lines.delete(line.resource);
    line.watch?.stop();
  }
}
