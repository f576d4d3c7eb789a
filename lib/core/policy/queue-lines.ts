/**
 * The local queue's records (policy/local-queue.ts): an acquire's ticket, its slot in the queue
 * of each of its resources, and the queue (line) of one resource — with their constructors, the
 * count of heard release announcements, and the questions asked of them without the queue's
 * state: who is admitted, until when local holders keep a ticket back, whether it defers.
 */
import { withFields } from '../fields';
import { monotonicNow } from '../clock';
import { LockContendedError } from '../errors';
import type { LockErrorDetail, NodeVote } from '../errors';
import { lockState } from '../lock';
import type { Lock } from '../lock';
import type { Handover } from './handover';
import type { TimelineEntry } from './timeline';
import type { Grant, ReleaseWatch } from './store';

/** An acquire's place in the local queue. */
export interface Ticket {
  /** Global arrival order (smaller = earlier). */
  readonly seq: number;
  readonly exclusive: boolean;
  /** The ttl it asks for (a grant installed for this engine goes to a ticket of its ttl only). */
  readonly ttl: number;
  /** One slot per resource, in the resource order of the request. */
  readonly slots: Slot[];
  /** Set while it sleeps: ends the sleep. */
  wake: (() => void) | undefined;
  /** A release was announced while it was busy: its next sleep returns at once. */
  handed: boolean;
  /** Its last wake-up was a local hand-off (counts toward the streak: streak.ts `mustYield`). */
  local: boolean;
  /** A lock handed over to it, taken over by its next attempt (policy/handover.ts). */
  takeover: Handover | undefined;
  /** Hand-over across processes: a grant installed for it, taken by its next loop turn. */
  installed: Grant | undefined;
  left: boolean;
}

export interface Slot {
  readonly ticket: Ticket;
  readonly line: Line;
  prev: Slot | undefined;
  next: Slot | undefined;
}

/**
 * The queue of one resource. Exists while it has entries; when that resource was contended (it
 * has a release watch), also while the exclusive holder it granted last holds, and LINGER_MS
 * after a lock that other engines waited for ended (policy/kept-lines.ts).
 */
export interface Line {
  readonly resource: string;
  first: Slot | undefined;
  last: Slot | undefined;
  /** The local exclusive holder granted from this queue, while it may still be valid. */
  holder: Lock | undefined;
  /**
   * Kept without entries (policy/kept-lines.ts): the timeline entry that drops it at its holder's
   * validity end, should the holder neither release nor be lost, or when it stopped lingering.
   */
  kept: TimelineEntry | undefined;
  /**
   * Kept (policy/kept-lines.ts `afterHolder`) after a lock that other engines waited for: a lock
   * granted from it before it is dropped is passed on too (`othersWaited`), even when granted at
   * its first attempt — the others may still wait.
   */
  lingering: boolean;
  /** The release watch of this resource (created at the first contended attempt). */
  watching: Promise<ReleaseWatch | undefined> | undefined;
  watch: ReleaseWatch | undefined;
  /** Consecutive grants that came from a local hand-off. */
  streak: number;
  /**
   * Release watchers of the resource (engines waiting for it, this one included) as the last
   * grant learnt (`Grant.watchers`; `Infinity` when it did not tell): more than one sets the
   * streak's bound and makes a yield ordered (policy/local-queue.ts).
   */
  watchers: number;
  /**
   * The longest poll mark the last hand-over's grant saw (`Grant.polled`, ms; 0: none): another
   * engine polls for the resource — announcements or not, the streak is bounded, and the yield
   * makes the local waiters defer to the pollers (`deferring`; policy/streak.ts).
   */
  polled: number;
  /**
   * This queue yielded to another engine's poller, and since then it was not granted and no
   * holder of another engine refused it or announced its release: its attempts defer to other
   * engines' poll marks (`AttemptRequest.defer`).
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
   * (policy/announced.ts `standBy`): its turn will be named.
   */
  ordered: boolean;
  /** Announcements from other engines (or this one's own, heard) that woke this queue so far. */
  announced: number;
  /** A stand-by attempt that no announcement cancels is due (`standBy`, not `ordered`). */
  entering: boolean;
  /** Votes of the last contended attempt made from this queue (reported to those who give up). */
  votes: readonly NodeVote[];
  /**
   * That attempt was refused by one holder with a quorum: its token. Only a release frees the
   * resource, so the clean-up announcements of other engines' failed attempts do not wake the
   * head; that holder's own release announcement wakes it each time a master announces it
   * (policy/local-queue.ts, watchLine).
   */
  heldBy: string | undefined;
  /**
   * Tokens whose release (or yield) was announced on this resource, the last few, with the
   * number of announcements heard (one per master that ran it): an attempt refused by one of
   * them reached masters that had not run that release yet, and its reply may have been read
   * after their announcements (replies and announcements come on different connections) — then
   * no announcement is left to wake the head (policy/local-queue.ts `refused`). Made at the
   * first announcement (most resources are never contended).
   */
  heard: Map<string, number> | undefined;
  /** The heard holder for which the head already retried at once (`refused`). */
  retriedFor: string | undefined;
  /**
   * Ordered yields: since when (wall ms) this engine waits for the resource — the time of the
   * first refused attempt since the queue's last grant (`AttemptRequest.waitSince`).
   */
  waitSince: number | undefined;
}

/** Until when `line`'s local holder is valid (monotonic ms); -Infinity when it has none. */
export function holderUntil(line: Line, now: number): number {
  const holder = line.holder;
  if (!holder) return -Infinity;
  const s = lockState(holder);
  if (s.released || s.lostReason || s.validUntil <= now) {
    line.holder = undefined;
    return -Infinity;
  }
  return s.validUntil;
}

/**
 * What a grant told the local queue (policy/local-queue.ts `granted`); a granted attempt's result
 * (policy/acquire-loop.ts `AttemptResult`) carries it.
 */
export interface GrantNews {
  /** A hand-over's grant: the release watchers the masters counted (`Grant.watchers`). */
  readonly watchers?: number;
  /** A hand-over's grant: the longest poll mark the masters had (ms, `Grant.polled`). */
  readonly polled?: number;
  /** Other engines waited in the masters' order (`Grant.othersWait`). */
  readonly othersWait?: boolean;
  /** Installed by another engine's yield or pass. */
  readonly installed?: boolean;
}

/**
 * Whether other engines waited for the plain lock of one resource that `ticket` was just granted
 * (`LockState.othersWait`: its release is a pass, policy/local-queue.ts `announceAs`): it was
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
  return {
    resource,
    first: undefined,
    last: undefined,
    holder: undefined,
    kept: undefined,
    lingering: false,
    watching: undefined,
    watch: undefined,
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
    votes: [],
    heldBy: undefined,
    heard: undefined,
    retriedFor: undefined,
    waitSince: undefined,
  };
}

/** Counts an announcement of `token`'s release on `line` (the last few tokens: `Line.heard`). */
export function countHeard(line: Line, token: string): void {
  const tokens = (line.heard ??= new Map<string, number>());
  const seen = tokens.get(token);
  if (seen !== undefined) {
    tokens.set(token, seen + 1);
    return;
  }
  tokens.set(token, 1);
  if (tokens.size > 4) tokens.delete(tokens.keys().next().value as string);
}

/**
 * Whether `ticket` may attempt now (policy/local-queue.ts): an exclusive entry when it is first in
 * the queue of each of its resources, a shared one when no exclusive entry comes before it — and
 * in both cases no local exclusive holder of those resources is still valid.
 */
export function admitted(ticket: Ticket): boolean {
  const now = monotonicNow();
  for (const slot of ticket.slots) {
    if (holderUntil(slot.line, now) > now) return false;
    if (slot === slot.line.first) continue;
    if (ticket.exclusive) return false;
    for (let s = slot.prev; s; s = s.prev) if (s.ticket.exclusive) return false;
  }
  return true;
}

/** When the local holders keeping `ticket` back stop being valid at the latest (ms, monotonic). */
export function holdersEnd(ticket: Ticket): number {
  const now = monotonicNow();
  let end = -Infinity;
  for (const slot of ticket.slots) end = Math.max(end, holderUntil(slot.line, now));
  return end > now ? end + 1 : Infinity;
}

/** The entries at the front of `line` that are admitted now. */
export function front(line: Line): Ticket[] {
  const list: Ticket[] = [];
  for (let s = line.first; s; s = s.next) {
    if (admitted(s.ticket)) list.push(s.ticket);
    if (s.ticket.exclusive) break;
  }
  return list;
}

/**
 * Whether `ticket`'s next attempt defers to other engines' pollers (`AttemptRequest.defer`):
 * a queue of its resources let the resource go to them (policy/streak.ts), and since then
 * neither was it granted nor did another engine's holder refuse it.
 */
export function defers(ticket: Ticket): boolean {
  for (const { line } of ticket.slots) if (line.deferring) return true;
  return false;
}

/** The contention error for a queued acquire that gives up before its turn came. */
export function contended(
  ticket: Ticket,
  detail: Omit<LockErrorDetail, 'votes'>,
): LockContendedError {
  const votes = ticket.slots.find((s) => s.line.votes.length > 0)?.line.votes ?? [];
  return new LockContendedError(withFields(detail, { votes }));
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
