/**
 * What a release announcement heard from the masters (another engine's release or yield, or
 * this engine's own yield) does to the head of a resource's local queue (fair/fair-queue.ts
 * `handOff`): attempt at once, after a delay, or stand by. The rules' constants and reasons:
 * fair/streak.ts. Efficiency and fairness only: the masters decide who holds a lock.
 */
import { monotonicNow } from '../base/clock';
import { installHeard } from './installed';
import { countHeard } from '../waiting/lines';
import type { Line } from './queue-lines';
import type { FairAnnounced as Announced, Reserved } from './fair-announcements';
import { COLLISION_SPREAD_MS, STAND_BY_MS, YIELD_MS, raceDelay } from './streak';
import type { Timeline } from '../base/clock';

/**
 * One master's announcement for `line`'s resource (what the release watch of the queue hears,
 * redis/masters/handoff.ts; `heard` as an `AnnouncementListener` gets it), applied to the line: counted,
 * and the head woken through `hooks.handOff` (fair/fair-queue.ts `handOff`) when it should
 * attempt; `hooks.owns` tells whether a token is this engine's (`LockStore.ownsToken`).
 */
export function heardOn(
  line: Line,
  heard: {
    announced: Announced;
    token: string;
    repeat: boolean;
    reserved?: Reserved;
    install?: boolean;
  },
  hooks: {
    owns: (token: string) => boolean | undefined;
    handOff: (announced: Announced, reserved?: Reserved) => void;
  },
): void {
  const { announced, token, repeat, reserved, install } = heard;
  if (announced !== 'cleanup') countHeard(line, token);
  if (line.deferring && announced !== 'cleanup' && hooks.owns(token) === false) {
    // Another engine's holder let the resource go: a poller took it since this queue yielded to the
    // pollers, and the deferral is over as at a refusal by that holder (fair-queue.ts `refused`).
    // Woken by such announcements, this queue's attempts ran while the key was free, so no holder
    // refused them: they kept deferring to the joined mark (fair/acquire-script.ts) until it
    // expired while that engine's waiters took the key again and again — the streak the yield was
    // to end.
    line.deferring = false;
  }
  if (install) return installHeard(line); // its outcome wakes the head (installed.ts)
  if (repeat) {
    // Another master announces a release already heard. It matters to a head refused by that
    // very holder: its attempt, woken by the first announcement, reached masters where the
    // release had not run yet (a slow master, a NOSCRIPT fallback). Without this it would sleep
    // until the holder's key expired elsewhere — a whole ttl. (Not when the key is kept for
    // another engine: the attempt would be refused again.)
    if (token === line.heldBy && reserved !== 'other') hooks.handOff('release');
    return;
  }
  // (`subscribed`, a late confirmation: a release may have been missed, try again.) A clean-up
  // does not wake a head that one holder refused on a quorum — unless it is that holder's: a
  // failed attempt or install that had a quorum of masters but no validity left, whose keys are
  // gone now (it would sleep until they expired).
  if (!(announced === 'cleanup' && line.heldBy !== undefined && token !== line.heldBy)) {
    hooks.handOff(announced, reserved);
  }
}

/**
 * How long (ms) the head of `line` waits before it attempts after an announcement (`announced`:
 * a release, a yield or another engine's clean-up; `reserved`: the yield named the engine the
 * masters keep the key for: this one or another), or `undefined` when it stands by
 * ({@link standBy}, which `wake`s it later if need be). Counts the announcement
 * (`Line.announced`).
 *
 * - Named for this engine: at once, whatever races it lost (the reservation also took the
 *   engine off the order).
 * - Named for another: stand by.
 * - A yield that names nobody: `raceDelay`, the longest waiting process first.
 * - A clean-up (a failed attempt of another engine: votes split): a random delay below
 *   COLLISION_SPREAD_MS, so that the heads woken by it do not split the votes again.
 * - A local waiter that yields (`Line.yielding`): at least YIELD_MS, so that the others go first.
 */
export function announcedDelay(
  line: Line,
  announced: Announced,
  reserved: Reserved | undefined,
  timeline: Timeline,
  wake: (line: Line) => void,
): number | undefined {
  line.announced++;
  const yielding = line.yielding;
  if (yielding) {
    line.yielding = false;
    line.streak = 0;
  }
  if (reserved === 'other') {
    standBy(line, timeline, wake);
    return undefined;
  }
  if (reserved === 'own') line.ordered = false;
  const delay =
    announced === 'cleanup'
      ? Math.random() * COLLISION_SPREAD_MS
      : announced === 'yield' && reserved === undefined
        ? raceDelay(line)
        : 0;
  return yielding ? Math.max(delay, YIELD_MS) : delay;
}

/**
 * Ordered yields: the masters keep the resource for another engine, named by the yield, for
 * RESERVE_MS (fair/streak.ts), and the head stands by instead of attempting into that
 * reservation. An engine in the order (`Line.ordered`) will be named in turn, and every
 * announcement tells that the resource moved on, so the head is woken only when none came for
 * STAND_BY_MS — the named engine never took the key (gone, or its attempt failed). An engine
 * that is not in the order is woken once STAND_BY_MS later whatever comes meanwhile: refused by
 * the next holder, it enters the order; otherwise the yields could name the others forever.
 */
function standBy(line: Line, timeline: Timeline, wake: (line: Line) => void): void {
  const at = monotonicNow() + STAND_BY_MS;
  if (line.ordered) {
    const seen = line.announced;
    timeline.add(at, () => {
      if (line.announced === seen) wake(line);
    });
  } else if (!line.entering) {
    line.entering = true;
    timeline.add(at, () => {
      line.entering = false;
      wake(line);
    });
  }
}
