/**
 * What a release announcement heard from the masters (another engine's release or yield, or
 * this engine's own yield) does to the head of a resource's local queue (policy/local-queue.ts
 * `handOff`): attempt at once, after a delay, or stand by. The rules' constants and reasons:
 * policy/streak.ts. Efficiency and fairness only: the masters decide who holds a lock.
 */
import { monotonicNow } from '../clock';
import type { Line } from './queue-lines';
import type { Announced, Reserved } from './store';
import { COLLISION_SPREAD_MS, STAND_BY_MS, YIELD_MS, raceDelay } from './streak';
import type { Timeline } from './timeline';

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
 * RESERVE_MS (policy/streak.ts), and the head stands by instead of attempting into that
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
