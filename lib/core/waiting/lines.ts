/**
 * The records of a waiting policy (waiting/waiting.ts): an acquire's ticket, its slot in the line
 * of each of its resources, and the line (FIFO) of one resource — with the questions asked of
 * them: who is admitted, until when local holders keep a ticket back, who is at the front. The
 * default policy (waiting/fifo-queue.ts) uses them as they are; the fair one (fair/fair-queue.ts,
 * fair/queue-lines.ts) extends them.
 */
import { withFields } from '../base/fields';
import { monotonicNow } from '../base/clock';
import { LockContendedError } from '../base/errors';
import type { LockErrorDetail, NodeVote } from '../base/errors';
import { lockState } from '../lock/lock';
import type { Lock } from '../lock/lock';
import type { Timeline, TimelineEntry } from '../base/clock';
import { onAbort } from '../base/wake';
import type { ReleaseWatch } from '../store';

/** An acquire's place in the lines of its resources. */
export interface Ticket {
  /** Global arrival order (smaller = earlier). */
  readonly seq: number;
  readonly exclusive: boolean;
  /** One slot per resource, in the resource order of the request. */
  readonly slots: Slot[];
  /** Set while it sleeps: ends the sleep. */
  wake: (() => void) | undefined;
  /** A release was announced while it was busy: its next sleep returns at once. */
  handed: boolean;
  left: boolean;
}

/** A ticket's entry in the line of one of its resources (a doubly linked list). */
export interface Slot {
  readonly ticket: Ticket;
  readonly line: Line;
  prev: Slot | undefined;
  next: Slot | undefined;
}

/**
 * The line of one resource. Exists while it has entries; when that resource was contended (it
 * has a release watch), also while the exclusive holder it granted last holds, so that the
 * process's next acquire of the resource waits behind that holder instead of attempting
 * against its keys.
 */
export interface Line {
  readonly resource: string;
  first: Slot | undefined;
  last: Slot | undefined;
  /** The local exclusive holder granted from this line, while it may still be valid. */
  holder: Lock | undefined;
  /** Kept without entries: the timeline entry that drops it at its holder's validity end. */
  kept: TimelineEntry | undefined;
  /** The release watch of this resource (created at the first contended attempt). */
  watching: Promise<ReleaseWatch | undefined> | undefined;
  watch: ReleaseWatch | undefined;
  /** Votes of the last contended attempt made from this line (reported to those who give up). */
  votes: readonly NodeVote[];
  /**
   * That attempt was refused by one holder with a quorum: its token. Only a release frees the
   * resource, so the clean-up announcements of other engines' failed attempts do not wake the
   * head; that holder's own release announcement wakes it each time a master announces it.
   */
  heldBy: string | undefined;
  /**
   * Tokens whose release was announced on this resource, the last few, with the number of
   * announcements heard (one per master that ran it): an attempt refused by one of them reached
   * masters that had not run that release yet, and its reply may have been read after their
   * announcements (replies and announcements come on different connections) — then no
   * announcement is left to wake the head ({@link releasedBefore}). Made at the first
   * announcement (most resources are never contended).
   */
  heard: Map<string, number> | undefined;
  /** The heard holder for which the head already retried at once ({@link releasedBefore}). */
  retriedFor: string | undefined;
  /**
   * An engine that handed the resource to its own next holder: the head polls it, and the line
   * does not watch the resource's announcements, until a refusal names another engine's holder
   * (waiting/fifo-queue.ts `refused`).
   */
  deafTo: string | undefined;
}

/** Appends `slot` (of a new ticket) to the end of its line. */
export function append(slot: Slot): void {
  const line = slot.line;
  slot.prev = line.last;
  if (line.last) line.last.next = slot;
  else line.first = slot;
  line.last = slot;
}

/** Takes `slot` out of its line, leaving no stale link. */
export function unlink(slot: Slot): void {
  const line = slot.line;
  if (slot.prev) slot.prev.next = slot.next;
  else line.first = slot.next;
  if (slot.next) slot.next.prev = slot.prev;
  else line.last = slot.prev;
  // A ticket still referenced after it left keeps no later entry alive.
  slot.prev = undefined;
  slot.next = undefined;
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
 * Whether `ticket` may attempt now: an exclusive entry when it is first in the line of each of
 * its resources, a shared one when no exclusive entry comes before it — and in both cases no
 * local exclusive holder of those resources is still valid.
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

/** The entries at the front of `line` that are admitted now (`T`: the policy's ticket type). */
export function front<T extends Ticket = Ticket>(line: Line): T[] {
  const list: T[] = [];
  for (let s = line.first; s; s = s.next) {
    if (admitted(s.ticket)) list.push(s.ticket as T);
    if (s.ticket.exclusive) break;
  }
  return list;
}

/**
 * Wakes the entries at the front of `line` after an entry left: admitted now, or kept back by a
 * local holder — they go back to sleep until that holder's validity ends (a lock left to expire
 * announces nothing).
 */
export function promote(line: Line): void {
  for (let s = line.first; s; s = s.next) {
    s.ticket.wake?.();
    if (s.ticket.exclusive) break;
  }
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
 * After a refusal of an attempt from `line` by the plain lock `heldBy` (on a quorum): whether a
 * quorum of masters already announced that holder's release (`Line.heard`) — they ran the
 * attempt before the release, and the announcements arrived before the attempt's replies were
 * read, so none may be left to wake the waiter, which would sleep until the holder's keys
 * expired although the resource is free. `'retry'`: at once, the first time for that holder;
 * `'poll'` after that (never a spin: the algorithm's retry delay). `undefined` otherwise — with
 * fewer announcements, the masters still to run the release announce it later.
 */
export function releasedBefore(
  line: Line,
  heldBy: string | undefined,
  quorum: number,
): 'retry' | 'poll' | undefined {
  if (heldBy === undefined || (line.heard?.get(heldBy) ?? 0) < quorum) return undefined;
  const retried = line.retriedFor === heldBy;
  line.retriedFor = heldBy;
  return retried ? 'poll' : 'retry';
}

/** The contention error for a queued acquire that gives up before its turn came. */
export function contended(
  ticket: Ticket,
  detail: Omit<LockErrorDetail, 'votes'>,
): LockContendedError {
  const votes = ticket.slots.find((s) => s.line.votes.length > 0)?.line.votes ?? [];
  return new LockContendedError(withFields(detail, { votes }));
}

/**
 * Appends `ticket` to the line of each of `resources` in `lines` (made with `newLine` where
 * there is none), in one global arrival order: the ticket that arrived first of all those queued
 * is first in every line it is in, hence admitted — no deadlock for multi-resource requests.
 */
export function enqueue<T extends Ticket, L extends Line>(
  lines: Map<string, L>,
  ticket: T,
  resources: readonly string[],
  newLine: (resource: string) => L,
): T {
  for (let i = 0; i < resources.length; i++) {
    const resource = resources[i];
    let line = lines.get(resource);
    if (!line) {
      line = newLine(resource);
      lines.set(resource, line);
    }
    const slot: Slot = { ticket, line, prev: undefined, next: undefined };
    append(slot);
    ticket.slots[i] = slot;
  }
  return ticket;
}

/**
 * Sleeps until `ticket` is woken (`Ticket.wake`), `until` (monotonic ms, on `timeline`) passes,
 * `signal` aborts or `draining` does. Returns at once when a release was handed to it meanwhile
 * (`Ticket.handed`), or when it already left.
 */
export function sleepOn(
  ticket: Ticket,
  until: number,
  signal: AbortSignal | undefined,
  draining: AbortSignal,
  timeline: Timeline,
): Promise<void> {
  if (ticket.handed) {
    ticket.handed = false;
    return Promise.resolve();
  }
  if (signal?.aborted || draining.aborted || ticket.left) return Promise.resolve();
  return new Promise<void>((resolve) => {
    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      ticket.wake = undefined;
      if (entry) timeline.remove(entry);
      stopWatching();
      resolve();
    };
    const entry = Number.isFinite(until) ? timeline.add(until, finish) : undefined;
    // Shared signals get one listener for all their sleepers (base/wake.ts).
    const stopWatching = signal ? onAbort(signal, finish) : noop;
    ticket.wake = finish;
  });
}

/**
 * The release watches of `ticket`'s resources (`watchLine` makes each) after a contended attempt
 * sent at `sentAt` (monotonic ms). `fresh`: a watch became active — a master confirmed its
 * subscription — after the attempt was sent, so a release may have been missed (retry at once);
 * `live`: every resource's releases are announced (otherwise the waiter polls).
 */
export async function watchAll<L extends Line>(
  ticket: { readonly slots: readonly { readonly line: L }[]; handed: boolean },
  sentAt: number,
  watchLine: (line: L) => Promise<ReleaseWatch | undefined>,
): Promise<{ fresh: boolean; live: boolean }> {
  let fresh = false;
  let live = true;
  for (const { line } of ticket.slots) {
    const w = await watchLine(line);
    if (w && w.activeSince >= sentAt) fresh = true;
    live &&= w?.live ?? false;
  }
  if (fresh) ticket.handed = false; // the retry at once covers what woke the busy ticket
  return { fresh, live };
}

/** The fields every line starts with (a new, empty line of `resource`). */
export function newBaseLine(resource: string): Line {
  return {
    resource,
    first: undefined,
    last: undefined,
    holder: undefined,
    kept: undefined,
    watching: undefined,
    watch: undefined,
    votes: [],
    heldBy: undefined,
    heard: undefined,
    retriedFor: undefined,
    deafTo: undefined,
  };
}

function noop(): void {}
