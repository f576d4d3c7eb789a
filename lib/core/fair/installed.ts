/**
 * Hand-over across processes, the local queue's part (lib/core/fair/README.md,
 * lib/core/fair/installs.ts): a grant that a yield installed for this engine goes to the head of
 * the resource's queue, when that head can take it; otherwise it is released like any lock.
 */
import type { Line, Ticket } from './queue-lines';
import type { Grant } from '../store';
import type { FairLockStore } from './fair-store';

/**
 * The outcome of an install for `line`'s resource (fair/installs.ts; `line` undefined when this
 * engine has no queue for it): a grant goes to {@link takerOf} — not while the engine drains —
 * or is released; a failed install (`undefined`) wakes the head (`wake`), which attempts.
 */
export function installed(
  line: Line | undefined,
  grant: Grant | undefined,
  draining: boolean,
  store: FairLockStore,
  wake: (line: Line) => void,
): void {
  if (!grant) {
    if (line) wake(line);
    return;
  }
  const taker = draining ? undefined : takerOf(line, grant);
  if (taker) give(taker, grant);
  else unused(store, grant);
}

/**
 * An announcement that a yield installed this engine's token on a master: the head is woken by
 * the install's outcome ({@link installed}), not by the announcement; the install took this
 * engine off the order (`Line.ordered`).
 */
export function installHeard(line: Line): void {
  line.announced++;
  line.ordered = false;
}

/**
 * Who takes `grant` in `line` (its resource's queue): the head, when it is a plain request of
 * exactly that resource and of the grant's ttl that has not left and holds no other installed
 * grant. `undefined`: nobody here can take it.
 */
export function takerOf(line: Line | undefined, grant: Grant): Ticket | undefined {
  const t = line?.first?.ticket;
  if (!t || t.left || !t.exclusive || t.slots.length !== 1 || t.installed) return undefined;
  return t.ttl === grant.ttl ? t : undefined;
}

/**
 * Gives `grant` to `ticket`: its acquire loop takes it at its next turn — woken now when it
 * sleeps, at the end of its attempt otherwise (its next sleep returns at once).
 */
export function give(ticket: Ticket, grant: Grant): void {
  ticket.installed = grant;
  if (ticket.wake) ticket.wake();
  else ticket.handed = true;
}

/**
 * Releases an installed grant nobody takes (like any lock's release, announced). Marked ended
 * first: an install of its token announced later is then deleted where it lands
 * (fair/installs.ts), not kept as part of a live lock.
 */
export function unused(store: FairLockStore, grant: Grant): void {
  grant.ended = true;
  void store.release(grant, false);
}
