/**
 * The lock scenarios. Each runs one contender for a fixed window of wall time and reports what
 * it measured; the runner interleaves contenders and rounds.
 */
import { performance } from 'node:perf_hooks';
import type { Contender } from './contenders';
import { percentile, sleep } from './stats';

/** Result of the uncontended sequential scenario. */
export interface SequentialResult {
  ops: number;
  opsPerSec: number;
  /** acquire + release latency, ms */
  p50: number;
  p99: number;
  /** CPU time (user + system) of this Node process per operation, µs: less sensitive to other load on the machine than wall time. */
  cpuUsPerOp: number;
}

/** Result of the parallel scenario. */
export interface ParallelResult {
  ops: number;
  opsPerSec: number;
  p50: number;
  p99: number;
  /** CPU time of this Node process per operation, µs. */
  cpuUsPerOp: number;
}

function cpuSince(start: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(start);
  return d.user + d.system;
}

/** Result of the contended scenario. */
export interface ContendedResult {
  /** Locks granted inside the window. */
  locks: number;
  locksPerSec: number;
  /** Time from calling acquire to holding the lock, ms. */
  waitP50: number;
  waitP99: number;
  waitMax: number;
  waitMean: number;
  /** Longest wait ÷ mean wait: how unfair the worst-served acquire was. */
  maxOverMean: number;
}

/** Mean of the samples; NaN when empty. */
export function mean(samples: readonly number[]): number {
  return samples.length ? samples.reduce((a, b) => a + b, 0) / samples.length : NaN;
}

/** The wait statistics of a contended run. */
export function waitStats(
  waits: readonly number[],
): Pick<ContendedResult, 'waitP50' | 'waitP99' | 'waitMax' | 'waitMean' | 'maxOverMean'> {
  const m = mean(waits);
  const max = percentile(waits, 100);
  return {
    waitP50: percentile(waits, 50),
    waitP99: percentile(waits, 99),
    waitMax: max,
    waitMean: m,
    maxOverMean: max / m,
  };
}

/** How many resource names the reused-names uncontended scenario cycles through. */
export const REUSED_NAMES = 50;

/**
 * The `i`-th name of the reused-names scenario: `r0` … `r49`, then `r0` again. The same names for
 * every library, each under its own key prefix (`bench:nr:r7`, `bench:ours:r7`, …), in every round.
 */
export function reusedName(i: number): string {
  return `r${i % REUSED_NAMES}`;
}

/**
 * (1) Uncontended: one caller, acquire + release in a loop, a distinct resource every time
 * (`${tag}:${i}`), or the names that `names` gives (the reused-names scenario: {@link reusedName}).
 */
export async function sequential(
  c: Contender,
  windowMs: number,
  tag: string,
  names: (i: number) => string = (i) => `${tag}:${i}`,
): Promise<SequentialResult> {
  const lat: number[] = [];
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  const end = start + windowMs;
  let i = 0;
  let now = start;
  while (now < end) {
    const held = await c.lock(names(i++));
    await held.release();
    const t = performance.now();
    lat.push(t - now);
    now = t;
  }
  const elapsed = now - start;
  return {
    ops: lat.length,
    opsPerSec: (lat.length / elapsed) * 1000,
    p50: percentile(lat, 50),
    p99: percentile(lat, 99),
    cpuUsPerOp: cpuSince(cpu0) / lat.length,
  };
}

/**
 * (2) `concurrency` independent resources: as many callers, each looping acquire + release on
 * its own distinct resources.
 */
export async function parallel(
  c: Contender,
  windowMs: number,
  concurrency: number,
  tag: string,
): Promise<ParallelResult> {
  const lat: number[] = [];
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  const end = start + windowMs;
  let last = start;
  const worker = async (w: number): Promise<void> => {
    let i = 0;
    let now = performance.now();
    while (now < end) {
      const held = await c.lock(`${tag}:${w}:${i++}`);
      await held.release();
      const t = performance.now();
      lat.push(t - now);
      now = t;
    }
    last = Math.max(last, now);
  };
  await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
  const elapsed = last - start;
  return {
    ops: lat.length,
    opsPerSec: (lat.length / elapsed) * 1000,
    p50: percentile(lat, 50),
    p99: percentile(lat, 99),
    cpuUsPerOp: cpuSince(cpu0) / lat.length,
  };
}

/**
 * (3) Contended: `workers` callers fight for ONE resource; each holds it for `criticalMs`
 * (a timer, like an awaited I/O) and releases, then asks again at once. Locks granted inside the
 * window count for locks/s; every acquire that started inside the window counts for the wait
 * percentiles (the last ones finish after the window, so the tail is not cut off).
 */
export async function contended(
  c: Contender,
  windowMs: number,
  workers: number,
  criticalMs: number,
  resource: string,
): Promise<ContendedResult> {
  const waits: number[] = [];
  let locks = 0;
  let inside = 0; // holders at once: must never exceed 1
  let violations = 0;
  const start = performance.now();
  const end = start + windowMs;
  const worker = async (): Promise<void> => {
    while (performance.now() < end) {
      const t0 = performance.now();
      const held = await c.lock(resource);
      const t1 = performance.now();
      waits.push(t1 - t0);
      if (t1 <= end) locks++;
      if (++inside > 1) violations++;
      await sleep(criticalMs);
      inside--;
      await held.release();
    }
  };
  await Promise.all(Array.from({ length: workers }, () => worker()));
  if (violations > 0) {
    // A benchmark of a lock that does not exclude would be meaningless: say so loudly.
    throw new Error(`${c.label}: ${violations} overlapping holders of ${resource}`);
  }
  return {
    locks,
    locksPerSec: (locks / windowMs) * 1000,
    ...waitStats(waits),
  };
}
