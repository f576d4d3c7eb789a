/**
 * Verdict and report of the stability soak (soak.ts). Every claim the soak makes has a
 * number in the report and a check that fails the run: duration, waiter count, faults injected,
 * heap trend (medians of the first and last third and a least-squares slope), key counts per
 * master (trend over the run and what is left at the end), warnings.
 */
import type { RedlockFootprint } from '../../lib/core/base/types';

/**
 * Keys on one master (−1 while it is down): DBSIZE, and the keys by kind — `marks`: poll marks
 * and writer-waiting flags, short-lived (one retry interval); foreign: not ours.
 */
export type KeyCounts = Record<
  'dbsize' | 'locks' | 'fences' | 'marks' | 'markers' | 'foreign',
  number
>;

export interface Sample {
  readonly t: number;
  readonly heapMb: number;
  readonly footprint: RedlockFootprint;
  readonly keys: KeyCounts[];
}

/** What the run was asked to do and what it did. */
export interface SoakRun {
  readonly requestedMs: number;
  /** Time under load: from the start of the loops until they were told to stop. */
  readonly loadMs: number;
  readonly waiters: number;
  /** Waiter loops that were granted their resource at least once. */
  readonly waitersGranted: number;
  /** Resources the run locks (a bound for the keys on a master). */
  readonly resources: number;
}

export interface HeapTrend {
  /** Median heap (MB) of the samples in the first and the last third of the load. */
  readonly first: number;
  readonly last: number;
  /**
   * Least-squares slope of the heap, MB per minute, over the samples under load after the first
   * third (the warm-up: connections, JIT, the waiters' first allocations).
   */
  readonly slopeMbPerMin: number;
  /** Growth either measure may show over the run before it counts as a leak. */
  readonly allowed: number;
}

/** One master's keys over the run: medians of the first and last third, the largest sample. */
export interface KeyTrend {
  readonly locks: { first: number; last: number; max: number };
  readonly fences: { first: number; last: number; max: number };
  readonly dbsize: { first: number; last: number; max: number };
}

export interface SoakResult {
  readonly run: SoakRun;
  readonly samples: Sample[];
  readonly final: Sample;
  readonly counts: Record<string, number>;
  readonly heap: HeapTrend;
  readonly keys: KeyTrend[];
  readonly warnings: string[];
  readonly failures: string[];
}

/** Heap may grow this much between the first and last third of the run. */
const HEAP_TOLERANCE_MB = 8;
const HEAP_TOLERANCE_RATIO = 0.15;
/** Fewest samples under load that make a trend. */
const MIN_SAMPLES = 6;
/** What a soak run must reach to count (duration, waiters). */
export const ISSUE_BAR = { durationMs: 600_000, waiters: 1000 } as const;

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)] : NaN;
};

function thirds<T>(xs: readonly T[]): { first: T[]; last: T[] } {
  const third = Math.max(1, Math.floor(xs.length / 3));
  return { first: xs.slice(0, third), last: xs.slice(-third) };
}

/** Least-squares slope of y over x. */
export function slope(points: readonly (readonly [number, number])[]): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((a, [x]) => a + x, 0) / n;
  const my = points.reduce((a, [, y]) => a + y, 0) / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

export function heapTrend(samples: readonly Sample[]): HeapTrend {
  const { first, last } = thirds(samples.map((s) => s.heapMb));
  const f = median(first);
  return {
    first: f,
    last: median(last),
    slopeMbPerMin: slope(samples.slice(first.length).map((s) => [s.t / 60_000, s.heapMb])),
    allowed: Math.max(HEAP_TOLERANCE_MB, f * HEAP_TOLERANCE_RATIO),
  };
}

/** Key counts per master over the run (samples where the master was down are left out). */
export function keyTrends(samples: readonly Sample[]): KeyTrend[] {
  const masters = samples[0]?.keys.length ?? 0;
  return Array.from({ length: masters }, (_, i) => {
    const up = samples.map((s) => s.keys[i]).filter((k) => k.dbsize >= 0);
    const trend = (f: (k: KeyCounts) => number) => {
      const { first, last } = thirds(up.map(f));
      return { first: median(first), last: median(last), max: Math.max(...up.map(f)) };
    };
    return {
      locks: trend((k) => k.locks),
      fences: trend((k) => k.fences),
      dbsize: trend((k) => k.dbsize),
    };
  });
}

/** Every failed claim, in words; empty when the run passed. */
export function verdict(r: Omit<SoakResult, 'failures'>): string[] {
  const { run, samples, final, counts, heap, keys, warnings } = r;
  const failures: string[] = [];
  // Duration and load.
  if (run.loadMs < run.requestedMs)
    failures.push(
      `ran ${(run.loadMs / 1000).toFixed(0)} s under load, asked for ${run.requestedMs / 1000} s`,
    );
  if (samples.length < MIN_SAMPLES)
    failures.push(`${samples.length} samples under load, fewer than ${MIN_SAMPLES}: no trend`);
  if (run.waitersGranted < run.waiters)
    failures.push(
      `${run.waiters - run.waitersGranted} of ${run.waiters} waiters were never granted their resource`,
    );
  for (const what of ['churn ok', 'waiter ok', 'fault pause', 'fault kill+restart-empty'])
    if (!counts[what]) failures.push(`no ${what}: the soak did not exercise it`);
  // Heap: the medians of the thirds, and the slope projected over the run.
  if (heap.last - heap.first > heap.allowed)
    failures.push(
      `heap grew ${(heap.last - heap.first).toFixed(1)} MB between the first and last third (allowed ${heap.allowed.toFixed(1)} MB)`,
    );
  const projected = heap.slopeMbPerMin * ((run.loadMs * 2) / 3 / 60_000);
  if (projected > heap.allowed)
    failures.push(
      `heap slope ${heap.slopeMbPerMin.toFixed(2)} MB/min is ${projected.toFixed(1)} MB over the last two thirds (allowed ${heap.allowed.toFixed(1)} MB)`,
    );
  // Keys: bounded by the resource set at every sample (a master restarted empty refills, so
  // the trend is reported, not judged), and nothing but counters and the marker at the end.
  // A lock key, a fencing counter and a poll mark per resource, the marker.
  const bound = 3 * run.resources + 2;
  keys.forEach((k, i) => {
    if (k.dbsize.max > bound)
      failures.push(
        `master ${i}: ${k.dbsize.max} keys in a sample, more than ${bound} (3 per resource + marker)`,
      );
    if (k.locks.max > run.resources)
      failures.push(`master ${i}: ${k.locks.max} lock keys for ${run.resources} resources`);
    if (k.fences.max > run.resources)
      failures.push(`master ${i}: ${k.fences.max} fencing counters for ${run.resources} resources`);
  });
  final.keys.forEach((k, i) => {
    const extra = k.dbsize - k.fences - k.markers;
    if (k.dbsize < 0) failures.push(`master ${i} unreachable at the end`);
    else if (k.locks > 0 || extra > 0)
      failures.push(
        `master ${i}: ${extra} keys besides fencing counters and boot marker at the end`,
      );
  });
  if (samples.concat(final).some((s) => s.keys.some((k) => k.foreign > 0)))
    failures.push("keys outside the engine's formats were written");
  for (const [table, size] of Object.entries(final.footprint))
    if (size !== 0) failures.push(`engine footprint ${table} = ${size} after every lock ended`);
  // Warnings and unhandled rejections.
  failures.push(...warnings);
  return failures;
}

const faultCount = (counts: Record<string, number>): number =>
  Object.entries(counts)
    .filter(([k]) => k.startsWith('fault '))
    .reduce((a, [, v]) => a + v, 0);

/** The report printed at the end: the claims with their numbers, samples, counters, verdict. */
export function formatSoak(result: SoakResult): string {
  const { run, samples, final, counts, heap, keys, warnings, failures } = result;
  const per = (s: Sample, f: (k: KeyCounts) => number): string => s.keys.map(f).join('/');
  const columns: [string, number, (s: Sample) => string][] = [
    ['at s', 6, (s) => (s.t / 1000).toFixed(0)],
    ['heap MB', 8, (s) => s.heapMb.toFixed(1)],
    ['held/chan/recent/wait/queue', 28, (s) => Object.values(s.footprint).join('/')],
    ['dbsize', 14, (s) => per(s, (k) => k.dbsize)],
    ['lock keys', 12, (s) => per(s, (k) => k.locks)],
    ['fence keys', 14, (s) => per(s, (k) => k.fences)],
    ['marks', 10, (s) => per(s, (k) => k.marks)],
    ['foreign', 8, (s) => per(s, (k) => k.foreign)],
  ];
  const line = (cells: string[]): string =>
    cells.map((c, i) => c.padStart(columns[i][1])).join(' ');
  const row = (s: Sample): string => line(columns.map(([, , f]) => f(s)));
  const step = Math.max(1, Math.floor(samples.length / 10));
  const t = (x: { first: number; last: number; max: number }): string =>
    `${x.first} -> ${x.last} (max ${x.max})`;
  const bar =
    run.loadMs >= ISSUE_BAR.durationMs && run.waiters >= ISSUE_BAR.waiters
      ? 'yes'
      : `no (needs >= ${ISSUE_BAR.durationMs / 1000} s and >= ${ISSUE_BAR.waiters} waiters)`;
  return [
    `${line(columns.map(([h]) => h))}   (per master: m0/m1/m2, -1 = down)`,
    ...samples.filter((_, i) => i % step === 0).map(row),
    `${row(final)}   <- after stop, every lock released or expired`,
    '',
    `duration:  ${(run.loadMs / 1000).toFixed(1)} s under load (asked ${run.requestedMs / 1000} s), ${samples.length} samples`,
    `waiters:   ${run.waiters} (${run.waitersGranted} granted at least once), ${counts['waiter ok'] ?? 0} waiter grants, ${counts['churn ok'] ?? 0} churn locks`,
    `faults:    ${faultCount(counts)} injected (${counts['fault pause'] ?? 0} pause, ${counts['fault kill+restart-empty'] ?? 0} kill+restart-empty)`,
    `heap:      median first third ${heap.first.toFixed(1)} MB, last third ${heap.last.toFixed(1)} MB, slope ${heap.slopeMbPerMin.toFixed(3)} MB/min after the first third (allowed growth ${heap.allowed.toFixed(1)} MB)`,
    ...keys.map(
      (k, i) =>
        `keys m${i}:   lock ${t(k.locks)}, fence ${t(k.fences)}, dbsize ${t(k.dbsize)} (first third -> last third); at the end ${final.keys[i].locks} lock keys`,
    ),
    `warnings:  ${warnings.length}${warnings.length ? `: ${warnings.slice(0, 3).join('; ')}` : ''}`,
    `bar (>= ${ISSUE_BAR.durationMs / 1000} s, >= ${ISSUE_BAR.waiters} waiters): ${bar}`,
    'counters:',
    ...Object.entries(counts)
      .sort()
      .map(([k, v]) => `  ${k}: ${v}`),
    failures.length ? `FAILED:\n${failures.map((f) => `  - ${f}`).join('\n')}` : 'OK',
  ].join('\n');
}
