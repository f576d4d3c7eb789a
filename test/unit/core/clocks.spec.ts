/**
 * The clock check's pure rules (lib/core/quorum/clocks.ts): the rate check between two samples of
 * one master, bracketed by the monotonic clock, and the comparison with the other masters.
 * The real faults (a master's clock jumping under the wall-clock shim) are
 * test/core/faults/clock-jump.spec.ts.
 */
import { CLOCK_SLACK, clockJump, againstPeers, offsetOf } from '../../../lib/core/quorum/clocks';
import type { ClockSample } from '../../../lib/core/quorum/clocks';

const EPOCH = 1_800_000_000_000;

/** A sample read `offset` ms off the monotonic clock, sent at `at`, answered `rtt` later. */
function sample(at: number, offset: number, rtt = 1): ClockSample {
  return { server: EPOCH + at + offset + rtt / 2, sent: at, received: at + rtt };
}

describe('clockJump (the rate check)', () => {
  const f = 0.01;

  it('is 0 for a clock that runs with the monotonic clock, whatever its offset', () => {
    expect(clockJump(sample(0, 5000), sample(1000, 5000), f)).toBe(0);
    expect(clockJump(sample(0, -123), sample(60_000, -123, 40), f)).toBe(0);
  });

  it('allows a rate within driftFactor and the constant slack, not more', () => {
    // 1 s apart: the allowance is 1001 × 0.01 + 2 ms (the brackets add 1 ms at most).
    const allowed = 1001 * f + CLOCK_SLACK;
    expect(clockJump(sample(0, 0), sample(1000, allowed - 1), f)).toBe(0);
    expect(clockJump(sample(0, 0), sample(1000, allowed + 2), f)).toBeGreaterThan(0);
  });

  it('measures a jump forward and a jump back with their sign', () => {
    const forward = clockJump(sample(0, 0), sample(500, 30_000), f);
    expect(forward).toBeGreaterThan(29_990);
    expect(forward).toBeLessThan(30_010);
    const back = clockJump(sample(0, 0), sample(500, -30_000), f);
    expect(back).toBeLessThan(-29_990);
    expect(back).toBeGreaterThan(-30_010);
  });

  it('never blames a long round trip: the bracket is the error bound', () => {
    // The reply took 800 ms (a busy event loop): the server read its clock somewhere in there.
    const slow: ClockSample = { server: EPOCH + 1000 + 790, sent: 1000, received: 1800 };
    expect(clockJump(sample(0, 0), slow, f)).toBe(0);
    const early: ClockSample = { server: EPOCH + 1000 + 10, sent: 1000, received: 1800 };
    expect(clockJump(sample(0, 0), early, f)).toBe(0);
  });
});

describe("againstPeers (a reading against the other masters')", () => {
  const tol = 1000;
  const f = 0.01;

  it('agrees with the majority, singles out the outlier with its offset', () => {
    const samples = [sample(0, 0), sample(1, 2), sample(2, 30_000), sample(3, -1), sample(4, 1)];
    expect(againstPeers(0, samples, tol, f)).toEqual({ verdict: 'agrees' });
    const out = againstPeers(2, samples, tol, f);
    expect(out.verdict).toBe('outlier');
    expect(out.verdict === 'outlier' && out.by).toBeGreaterThan(29_990);
  });

  it('finds an outlier among the three first replies of five masters', () => {
    const samples = [undefined, undefined, sample(0, 30_000), sample(0, 0), sample(1, 0)];
    expect(againstPeers(2, samples, tol, f).verdict).toBe('outlier');
    expect(againstPeers(3, samples, tol, f).verdict).toBe('agrees');
  });

  it('decides nothing with two samples that disagree, or a tie', () => {
    expect(againstPeers(0, [sample(0, 0), sample(0, 30_000)], tol, f).verdict).toBe('undecided');
    const tie = [sample(0, 0), sample(0, 0), sample(0, 30_000), sample(0, 30_000)];
    expect(againstPeers(0, tie, tol, f).verdict).toBe('undecided');
    expect(againstPeers(0, [sample(0, 0), undefined, undefined], tol, f).verdict).toBe('undecided');
  });

  it('agrees with two samples that agree, and alone over one master', () => {
    expect(againstPeers(1, [sample(0, 0), sample(0, 400)], tol, f).verdict).toBe('agrees');
    expect(againstPeers(0, [sample(0, 999_999)], tol, f).verdict).toBe('agrees');
  });

  it('takes the tolerance, the error bounds and the time between samples into account', () => {
    const mine = sample(60_000, 1500, 2);
    // 1.5 s off, 60 s after the others' samples: 1000 + 1 + 600 + 2 ms of allowance covers it.
    expect(againstPeers(2, [sample(0, 0), sample(0, 0), mine], tol, f).verdict).toBe('agrees');
    expect(againstPeers(2, [sample(59_000, 0), sample(59_000, 0), mine], tol, f).verdict).toBe(
      'outlier',
    );
  });

  it('offsetOf halves the round trip into the error bound', () => {
    expect(offsetOf({ server: 1000, sent: 10, received: 30 })).toEqual({ offset: 980, error: 10 });
  });
});
