/**
 * The fair queue's records (fair/fair-queue.ts): the records of waiting/lines.ts with what the
 * hand-over across processes keeps of them (streaks, yields, deferrals, the masters' order,
 * installs) — with their constructors and the questions asked of them without the queue's
 * state: whether it defers, since when it waits, whether others waited.
 */
import type { Handover } from './handover';
import { newBaseLine } from '../waiting/lines';
import type { Line as BaseLine, Slot as BaseSlot, Ticket as BaseTicket } from '../waiting/lines';
import { withFields } from '../base/fields';
import type { Grant } from '../store';

/** An acquire's place in the fair queue. */
export interface Ticket extends BaseTicket {
  /** The ttl it asks for (a grant installed for this engine goes to a ticket of its ttl only). */
  readonly ttl: number;
  readonly slots: Slot[];
  /** Its last wake-up was a local hand-off (counts toward the streak: streak.ts `mustYield`). */
  local: boolean;
  /** A lock handed over to it, taken over by its next attempt (fair/handover.ts). */
  takeover: Handover | undefined;
  /** Hand-over across processes: a grant installed for it, taken by its next loop turn. */
  installed: Grant | undefined;
}

/** A fair ticket's slot in a fair line. */
export interface Slot extends BaseSlot {
  readonly ticket: Ticket;
  readonly line: Line;
  prev: Slot | undefined;
  next: Slot | undefined;
}

/**
 * The queue of one resource. Exists while it has entries; when that resource was contended (it
 * has a release watch), also while the exclusive holder it granted last holds, and LINGER_MS
 * after a lock that other engines waited for ended (fair/kept-lines.ts).
 */
export interface Line extends BaseLine {
  first: Slot | undefined;
  last: Slot | undefined;
  /**
   * Kept (fair/kept-lines.ts `afterHolder`) after a lock that other engines waited for: a lock
   * granted from it before it is dropped is passed on too (`othersWaited`), even when granted at
   * its first attempt — the others may still wait.
   */
  lingering: boolean;
  /** Consecutive grants that came from a local hand-off. */
  streak: number;
  /**
   * Release watchers of the resource (engines waiting for it, this one included) as the last
   * grant learnt (`FairGrant.watchers`; `Infinity` when it did not tell): more than one sets the
   * streak's bound and makes a yield ordered (fair/fair-queue.ts).
   */
  watchers: number;
  /**
   * The longest poll mark the last hand-over's grant saw (`FairGrant.polled`, ms; 0: none): another
   * engine polls for the resource — announcements or not, the streak is bounded, and the yield
   * makes the local waiters defer to the pollers (`deferring`; fair/streak.ts).
   */
  polled: number;
  /**
   * This queue yielded to another engine's poller, and since then it was not granted and no
   * holder of another engine refused it or announced its release: its attempts defer to other
   * engines' poll marks (`FairAttemptRequest.defer`).
   */
  deferring: boolean;
  /**
   * An attempt from this queue was refused by another engine's plain lock, so the masters may
   * hold this engine's poll mark of the resource: taken down when the queue ends
   * (`LockStore.unmarkPolling`), so that deferring waiters of other engines need not wait for
   * it to expire.
   */
  marked: boolean;
  /** Contended attempts made from this queue since its last grant (races lost: raceDelay). */
  lost: number;
  /** The next local waiter yields: it waits for the release announcement, then streak.ts YIELD_MS. */
  yielding: boolean;
  /**
   * Ordered yields: as far as this engine knows, the masters keep it in the resource's order —
   * a refusal of this queue's single-resource plain attempt by another engine's lock entered
   * it, and so did this queue's own ordered yield; a grant or a reservation for it took it off.
   * A yield that names another engine then lets the head stand by until the next announcement
   * (fair/announced.ts `standBy`): its turn will be named.
   */
  ordered: boolean;
  /** Announcements from other engines (or this one's own, heard) that woke this queue so far. */
  announced: number;
  /** A stand-by attempt that no announcement cancels is due (`standBy`, not `ordered`). */
  entering: boolean;
  /**
   * Ordered yields: since when (wall ms) this engine waits for the resource — the time of the
   * first refused attempt since the queue's last grant (`FairAttemptRequest.waitSince`).
   */
  waitSince: number | undefined;
}

/**
 * What a granted attempt told of other engines waiting (from fair-store.ts `FairGrant`'s fields
 * of the same names), or that the lock was installed by another engine's yield or pass.
 */
export interface GrantNews {
  /** A hand-over's grant: the release watchers the masters counted (`FairGrant.watchers`). */
  readonly watchers?: number;
  /** A hand-over's grant: the longest poll mark the masters had (ms, `FairGrant.polled`). */
  readonly polled?: number;
  /** Other engines waited in the masters' order (`FairGrant.othersWait`). */
  readonly othersWait?: boolean;
  /** Installed by another engine's yield or pass. */
  readonly installed?: boolean;
}

/**
 * Whether other engines waited for the plain lock of one resource that `ticket` was just granted
 * (its release is a pass, fair/fair-queue.ts `announceAs`): it was
 * installed by another engine's yield or pass, the masters had other engines in the order
 * (`othersWait`, even at a first attempt), a hand-over's grant counted another engine's watch
 * (`watchers` > 1) or poll mark, or this acquire was refused by another engine's plain lock, or
 * this engine yielded, meanwhile (`Line.ordered`: it entered the masters' order), or its queue
 * was kept after a lock that others waited for (`Line.lingering`).
 */
export function othersWaited(ticket: Ticket, news: GrantNews): boolean {
  if (!ticket.exclusive || ticket.slots.length !== 1) return false;
  const { watchers } = news;
  return (
    news.installed === true ||
    news.othersWait === true ||
    (news.polled ?? 0) > 0 ||
    (watchers !== undefined && watchers > 1) ||
    ticket.slots[0].line.ordered ||
    ticket.slots[0].line.lingering
  );
}

/** A new ticket: `seq` its arrival order, one (empty) slot per resource. */
export function newTicket(seq: number, exclusive: boolean, resources: number, ttl = 0): Ticket {
  return {
    seq,
    exclusive,
    ttl,
    // Sized once (a pushed-to array reserves room for 16 more): 10,000 waiters' memory.
    slots: new Array<Slot>(resources),
    wake: undefined,
    handed: false,
    local: false,
    takeover: undefined,
    installed: undefined,
    left: false,
  };
}

/** A new, empty queue of `resource`. */
export function newLine(resource: string): Line {
  return withFields(newBaseLine(resource), {
    first: undefined,
    last: undefined,
    lingering: false,
    streak: 0,
    watchers: Infinity,
    polled: 0,
    deferring: false,
    marked: false,
    lost: 0,
    yielding: false,
    ordered: false,
    announced: 0,
    entering: false,
    waitSince: undefined,
  }) as Line;
}

/**
 * Whether `ticket`'s next attempt defers to other engines' pollers (`FairAttemptRequest.defer`):
 * a queue of its resources let the resource go to them (fair/streak.ts), and since then
 * neither was it granted nor did another engine's holder refuse it.
 */
export function defers(ticket: Ticket): boolean {
  for (const { line } of ticket.slots) if (line.deferring) return true;
  return false;
}

/** Since when the engine waits for `ticket`'s resources (`Line.waitSince`, the earliest). */
export function waitingSince(ticket: Ticket): number | undefined {
  let since: number | undefined;
  for (const { line } of ticket.slots) {
    if (line.waitSince !== undefined && (since === undefined || line.waitSince < since)) {
      since = line.waitSince;
    }
  }
  return since;
}
