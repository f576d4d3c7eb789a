/**
 * The local queue's rules across processes (fair/fair-queue.ts, "Fair across processes" and
 * "Ordered races"): how long a process may keep handing a resource to its own waiters, and in
 * which order the heads of the processes that wait attempt after it lets go. Efficiency and
 * fairness only: the masters decide who holds a lock.
 */
import type { Line } from './queue-lines';
import { RESERVE_MS } from './install-order';

/**
 * Consecutive local hand-offs of one resource before the next local waiter yields to others,
 * when other engines poll for it (their refused attempts raised a poll mark) and this engine
 * hears no release announcements (`handoff: false`, or subscriptions that failed): every turn
 * between processes then takes a release round and a poll. With announcements:
 * {@link MAX_INSTALL_STREAK}.
 *
 * 8, not 4 (bench/multiproc.ts): a shorter streak evens the waits across
 * processes but costs throughput while a turn between processes takes a release round, the
 * announcement and an acquire round (2.0–2.6 ms against 0.6–0.8 ms for a local hand-over, on 2
 * cores); and a test with polling engines showed the bound 2 × (streak + 1) is not kept at 4.
 */
export const MAX_LOCAL_STREAK = 8;

/**
 * The same while another engine watches the resource (`FairGrant.watchers`, learnt from the last
 * hand-over: the masters count the subscribers of its release channel): the yield is ordered
 * (fair/fair-queue.ts `announceAs`) and, for a lock of one resource, installs the token of
 * the engine that waited longest (lib/core/fair/README.md), so a turn between
 * processes takes no acquire round: 1.2–1.9 ms. 4 processes × 4 callers in the benchmark, 10 ms
 * retries (bench/multiproc.ts): streak 4 with installs 408–434 locks/s and p99 wait 64
 * ms; streak 8 without 388–421 locks/s and 90–117 ms (same run). With one other engine, 2
 * processes × 2 callers: 599 locks/s and p99 14 ms, against 553 and 26 ms when its yield was a
 * plain release after {@link MAX_LOCAL_STREAK}.
 */
export const MAX_INSTALL_STREAK = 4;

/**
 * The same when no other engine was seen watching (neither counted on the release channel nor
 * by a poll mark): a process alone pays the yield (a release round, the announcement and
 * {@link YIELD_MS}) once per this many hand-offs instead of once per {@link MAX_INSTALL_STREAK}.
 */
export const MAX_ALONE_STREAK = 64;

/**
 * How long (ms) a local waiter that yields lets the waiters of other processes go first after a
 * release announcement: enough for their attempt to reach the masters before its own.
 */
export const YIELD_MS = 1;

/**
 * Ordered races after a yield (see {@link raceDelay}): a head that lost `k` races since its
 * queue's last grant attempts `RACE_STEP_MS × max(0, RACE_LEVELS − k)` ms after the
 * announcement — the longest waiting process first, at most RACE_LEVELS × RACE_STEP_MS late.
 */
export const RACE_LEVELS = 3;
/**
 * See {@link RACE_LEVELS}. 2 ms, not 1: on a loaded machine a head's attempt often reaches the
 * masters more than 1 ms after the announcement, and the order was lost (4 processes × 4
 * callers: 80% of the rotations were in order with 1 ms steps, 85% with 2 ms, p99 wait 110 →
 * 97 ms; 3 ms cost throughput; bench/multiproc.ts). The first head to attempt, the one
 * that lost the most races, waits 0 ms either way.
 */
export const RACE_STEP_MS = 2;

/**
 * How far (ms) the heads woken by the clean-up of another engine's failed attempt spread their
 * next attempts (fair/announced.ts: uniformly random in `[0, COLLISION_SPREAD_MS)`): Redlock's
 * random delay after a failed attempt (docs/REDLOCK.md, "N masters": contenders desynchronize).
 * Heads refused by split votes wake on each other's clean-ups; attempting at once, they split
 * the votes again. (The 50–120 ms storms of this kind seen with 4 processes × 1 caller were fed
 * by hand-overs that reached only 3 of 5 masters, fixed in RELEASE_SCRIPT; with that fix, this
 * spread measured the same throughput and a p99 no worse: bench/multiproc.ts.)
 */
export const COLLISION_SPREAD_MS = 2 * RACE_STEP_MS;

export { RESERVE_MS };

/**
 * Ordered yields: how long (ms) the heads of the engines that a yield did not name stand by
 * before they attempt (fair/announced.ts `standBy`), unless another announcement came
 * first. Past the reservation ({@link RESERVE_MS}) with room for a named engine that took the
 * key late: it only matters when that engine never took it, and a turn of a streak usually
 * ends (with the next announcement) sooner.
 */
export const STAND_BY_MS = 2 * RESERVE_MS;

/**
 * Whether the next local waiter of `line` must yield to other processes (fair/fair-queue.ts):
 * after {@link MAX_INSTALL_STREAK} hand-offs while another engine watches the resource,
 * {@link MAX_ALONE_STREAK} while none was seen; without announcements, {@link MAX_LOCAL_STREAK}
 * once a poll mark told of another engine.
 *
 * Without release announcements (`handoff: false`, or subscriptions that failed) the waiters of
 * other processes poll, and a process that hands a resource over locally never frees its key: their
 * polls would never find it free. Their refused attempts leave poll marks on the masters
 * (fair/fair-keys.ts `pollKey`, raised for one of their retry intervals), which the hand-overs read
 * (`Line.polled`). With a mark seen, the streak is bounded by {@link MAX_LOCAL_STREAK} here too,
 * and after the yield the local waiters defer to the pollers (fair-queue.ts `handOff`,
 * `Line.deferring`): their attempts take no free key on which another engine's mark is up
 * (fair/acquire-script.ts FAIR_ACQUIRE_SCRIPT, `defer`), so the poller that left it takes the key
 * at its next poll; the deferred attempt appends our id to its mark, and a waiter of ours refused
 * by it later raises our own mark, either of which ends that engine's streak in turn. Until a
 * holder of another engine refuses them or releases the resource (a poller took the key; its
 * release announcement, heard, counts as a refusal) or they are granted: were every engine that
 * yielded to defer on, all would defer to the engine refused last, and the resource would go last
 * come, first served. An engine whose last waiter for the resource is done takes its mark down
 * (`LockStore.unmarkPolling`), so nobody defers to a poller that left. (A timed hold-back for what
 * the mark had left, before: marks live a whole retry interval plus two request timeouts, and a
 * yield waited for it even when the poller had long come and gone.) Without a mark nobody polls,
 * and the process keeps its streak. The same deferral applies with announcements when only a mark
 * told of the other engine (a Cluster of several nodes, where the masters may not count its watch
 * and it hears the release a little later).
 */
export function mustYield(line: Line): boolean {
  if (!line.watch?.live) return line.polled > 0 && line.streak >= MAX_LOCAL_STREAK;
  return line.streak >= (line.watchers > 1 ? MAX_INSTALL_STREAK : MAX_ALONE_STREAK);
}

/**
 * How long (ms) the head of `line` waits after a yield announcement before it attempts:
 * {@link RACE_STEP_MS} for each of the {@link RACE_LEVELS} races it has not lost yet. The heads
 * of other processes that lost more races since their last grant go first; the yielding
 * process (none lost: it just held the resource) goes last. No coordination: every process
 * reads its own count, and ties race as before.
 */
export function raceDelay(line: Pick<Line, 'lost'>): number {
  return RACE_STEP_MS * Math.max(0, RACE_LEVELS - line.lost);
}
