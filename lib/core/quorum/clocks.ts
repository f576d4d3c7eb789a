/**
 * The clock assumption of Redlock, checked (docs/REDLOCK.md, "Clocks"; docs/guarantees.md,
 * "Clock jumps"): the masters expire keys by their **wall clocks**, so a master whose clock jumps
 * forward by J drops every key J early, and a majority that includes it can grant a lock that
 * another client still holds by its own monotonic clock. The algorithm only assumes the clocks
 * run at about the same rate — the drift allowance, ttl × driftFactor + 2 ms, covers the rest.
 * Here that assumption is tested, as pure decisions over clock samples (no Redis, no timers):
 *
 * - A **sample** is one reading of a master's clock (`TIME`, read in the same round trip as a
 *   vote), bracketed by the engine's monotonic clock: the server read its clock at some moment
 *   between `sent` and `received`, so the round trip is the error bound — exact, however busy the
 *   event loop was (a late read only widens the bracket).
 * - **Rate check** ({@link clockJump}): between two samples of one master, its clock must have
 *   advanced as much as the monotonic clock did, within the bracket and the drift allowance
 *   (driftFactor × the time between them + 2 ms). Anything else — a step forward or back — is a
 *   jump of about the excess.
 * - **Against the peers** ({@link againstPeers}): a master's reading is compared with the other
 *   masters' latest readings — the offsets (server clock − monotonic clock) of masters whose
 *   clocks agree lie within `tolerance` of each other. A master outside the majority that agrees
 *   is an outlier; without such a majority (too few readings yet, or a tie) nothing is decided.
 *   It catches what the rate check cannot: a master the engine never read before, and a clock
 *   set back and jumped forward again between two of its readings.
 *
 * A master found jumping (or an outlier) is treated as one that restarted empty: its votes do not
 * count for the quarantine period (redis/masters/clock-watch.ts).
 */

/** One reading of a master's clock, bracketed by the engine's monotonic clock (ms). */
export interface ClockSample {
  /** The master's wall clock (ms since the epoch, with its microseconds as the fraction). */
  readonly server: number;
  /** Monotonic time the request was written (or earlier). */
  readonly sent: number;
  /** Monotonic time the reply was read (or later). */
  readonly received: number;
}

/** The constant part of the drift allowance (ms): Redis rounds expiries to the millisecond. */
export const CLOCK_SLACK = 2;

/**
 * How far (ms) the master's clock moved beyond what the monotonic clock allows between `prev` and
 * `next` of the same master: positive for a jump forward, negative for one back, 0 when the two
 * samples are consistent (within the brackets and `driftFactor` × the time between them + 2 ms).
 */
export function clockJump(prev: ClockSample, next: ClockSample, driftFactor: number): number {
  const moved = next.server - prev.server;
  // The monotonic time between the two server readings lies in [shortest, longest].
  const shortest = next.sent - prev.received;
  const longest = next.received - prev.sent;
  const allowance = longest * driftFactor + CLOCK_SLACK;
  if (moved > longest + allowance) return moved - longest;
  if (moved < shortest - allowance) return moved - Math.max(0, shortest);
  return 0;
}

/** The offset (ms) of a master's clock against the monotonic clock, and its error bound. */
export function offsetOf(s: ClockSample): { readonly offset: number; readonly error: number } {
  return { offset: s.server - (s.sent + s.received) / 2, error: (s.received - s.sent) / 2 };
}

/** What the comparison with the other masters found of one master (see the file comment). */
export type PeerVerdict =
  /** Its clock agrees with a majority of the sampled masters. */
  | { readonly verdict: 'agrees' }
  /** Its clock is off the majority's by `by` ms (positive: ahead). */
  | { readonly verdict: 'outlier'; readonly by: number }
  /** Too few samples, or no majority that agrees: decided at a later attempt. */
  | { readonly verdict: 'undecided' };

/**
 * The verdict on master `i`'s latest sample, against every master's latest sample (`samples`,
 * undefined where there is none; `samples[i]` is the one judged). Two offsets agree when they
 * differ by at most `tolerance` plus both error bounds plus the drift allowance over the time
 * between the samples. The reference is the median offset: masters within reach of it form the
 * agreeing group, which must hold more than half of the samples and at least two of them; a
 * lone engine over one master (`masters === 1`) has nobody to compare with and agrees.
 */
export function againstPeers(
  i: number,
  samples: readonly (ClockSample | undefined)[],
  tolerance: number,
  driftFactor: number,
): PeerVerdict {
  const mine = samples[i];
  if (!mine) return { verdict: 'undecided' };
  if (samples.length === 1) return { verdict: 'agrees' };
  const known: ClockSample[] = [];
  for (const s of samples) if (s) known.push(s);
  if (known.length < 2) return { verdict: 'undecided' };
  const offsets = known.map((s) => offsetOf(s).offset).sort((a, b) => a - b);
  const mid = offsets.length >> 1;
  const median = offsets.length % 2 === 1 ? offsets[mid] : (offsets[mid - 1] + offsets[mid]) / 2;
  const at = (s: ClockSample): number => (s.sent + s.received) / 2;
  // The allowance grows with the time between the samples compared (clock rates differ): for
  // another master's sample, the time between it and the judged one; for the judged one, the
  // time to the farthest sample the median may come from.
  let farthest = 0;
  for (const s of known) farthest = Math.max(farthest, Math.abs(at(s) - at(mine)));
  const near = (s: ClockSample): boolean => {
    const o = offsetOf(s);
    const apart = s === mine ? farthest : Math.abs(at(s) - at(mine));
    return Math.abs(o.offset - median) <= tolerance + o.error + apart * driftFactor + CLOCK_SLACK;
  };
  let agreeing = 0;
  for (const s of known) if (near(s)) agreeing++;
  if (agreeing < 2 || agreeing * 2 <= known.length) return { verdict: 'undecided' };
  if (near(mine)) return { verdict: 'agrees' };
  return { verdict: 'outlier', by: offsetOf(mine).offset - median };
}
