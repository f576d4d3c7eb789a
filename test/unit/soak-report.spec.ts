/**
 * The soak's verdict (test/soak/report.ts): each claim of the soak fails the run when it
 * does not hold — duration, waiters, faults, heap (thirds and slope), keys per master, warnings.
 * Synthetic samples: this checks the judging, `npm run soak` produces the real ones.
 */
import type { KeyCounts, Sample, SoakResult } from '../../test/soak/report';
import { formatSoak, heapTrend, keyTrends, slope, verdict } from '../../test/soak/report';

const RESOURCES = 204;
const keys = (locks: number, fences = 100): KeyCounts => ({
  dbsize: locks + fences + 2,
  locks,
  fences,
  marks: 0,
  markers: 2,
  foreign: 0,
});
const idle = {
  heldLocks: 0,
  handoffChannels: 0,
  handoffRecent: 0,
  handoffWaiters: 0,
  queuedAcquires: 0,
};

/** 30 samples over 10 minutes; `heap(i)` and `locks(i)` shape the run. */
function samples(heap: (i: number) => number, locks = (_i: number) => 10): Sample[] {
  return Array.from({ length: 30 }, (_, i) => ({
    t: i * 20_000,
    heapMb: heap(i),
    footprint: { ...idle, heldLocks: 5 },
    keys: [0, 1, 2].map(() => keys(locks(i))),
  }));
}

function judge(over: Partial<Omit<SoakResult, 'failures'>> & { samples?: Sample[] } = {}) {
  const s = over.samples ?? samples((i) => 40 + (i % 2) * 0.1);
  const result: Omit<SoakResult, 'failures'> = {
    run: {
      requestedMs: 600_000,
      loadMs: 600_500,
      waiters: 1000,
      waitersGranted: 1000,
      resources: RESOURCES,
    },
    samples: s,
    final: { t: 610_000, heapMb: 40, footprint: idle, keys: [0, 1, 2].map(() => keys(0)) },
    counts: { 'churn ok': 10, 'waiter ok': 10, 'fault pause': 3, 'fault kill+restart-empty': 3 },
    heap: heapTrend(s),
    keys: keyTrends(s),
    warnings: [],
    ...over,
  };
  return {
    failures: verdict(result),
    report: formatSoak({ ...result, failures: verdict(result) }),
  };
}

it('passes a flat run and states every claim in the report', () => {
  const { failures, report } = judge();
  expect(failures).toEqual([]);
  expect(report).toMatch(/duration: +600\.5 s under load \(asked 600 s\)/);
  expect(report).toMatch(/waiters: +1000 \(1000 granted at least once\)/);
  expect(report).toMatch(/faults: +6 injected \(3 pause, 3 kill\+restart-empty\)/);
  expect(report).toMatch(
    /heap: .*first third 40\.\d MB, last third 40\.\d MB, slope -?0\.\d+ MB\/min/,
  );
  expect(report).toMatch(/keys m2: +lock 10 -> 10 \(max 10\), fence 100 -> 100/);
  expect(report).toMatch(/warnings: +0/);
  expect(report).toMatch(/\bbar \(>= .*: yes/);
});

it.each<[string, Parameters<typeof judge>[0], RegExp]>([
  [
    'a short run',
    {
      run: {
        requestedMs: 600_000,
        loadMs: 300_000,
        waiters: 1000,
        waitersGranted: 1000,
        resources: RESOURCES,
      },
    },
    /ran 300 s under load, asked for 600 s/,
  ],
  [
    'a starved waiter',
    {
      run: {
        requestedMs: 600_000,
        loadMs: 600_000,
        waiters: 1000,
        waitersGranted: 999,
        resources: RESOURCES,
      },
    },
    /1 of 1000 waiters were never granted/,
  ],
  [
    'no kill fault',
    { counts: { 'churn ok': 1, 'waiter ok': 1, 'fault pause': 4 } },
    /no fault kill\+restart-empty/,
  ],
  [
    'a warning',
    { warnings: ['warning MaxListenersExceededWarning: ...'] },
    /MaxListenersExceededWarning/,
  ],
  [
    'a heap leak of 2 MB/min',
    { samples: samples((i) => 40 + (i * 2) / 3) },
    /heap grew .* between the first and last third/,
  ],
  [
    'a lock key per resource and more',
    {
      samples: samples(
        () => 40,
        (i) => (i === 20 ? 300 : 10),
      ),
    },
    /master 0: 300 lock keys for 204 resources/,
  ],
  [
    'a lock key left at the end',
    { final: { t: 1, heapMb: 40, footprint: idle, keys: [keys(1), keys(0), keys(0)] } },
    /master 0: 1 keys besides fencing counters/,
  ],
  [
    'an engine table entry left',
    {
      final: {
        t: 1,
        heapMb: 40,
        footprint: { ...idle, handoffRecent: 3 },
        keys: [0, 1, 2].map(() => keys(0)),
      },
    },
    /handoffRecent = 3/,
  ],
])('fails %s', (_what, over, expected) => {
  expect(judge(over).failures.join('\n')).toMatch(expected);
});

it('fails a heap that only the slope shows (a late leak)', () => {
  // Flat for two thirds, then 1 MB per sample: the medians of the thirds differ by 6 MB, the
  // slope over the last two thirds is 1.6 MB/min, 10.8 MB over the run.
  const s = samples((i) => (i < 20 ? 40 : 40 + (i - 19)));
  const trend = heapTrend(s);
  expect(trend.last - trend.first).toBeLessThan(trend.allowed);
  expect(judge({ samples: s }).failures.join('\n')).toMatch(/heap slope .* MB\/min/);
});

it('computes a least-squares slope', () => {
  expect(
    slope([
      [0, 1],
      [1, 3],
      [2, 5],
    ]),
  ).toBeCloseTo(2);
  expect(slope([[0, 1]])).toBe(0);
});
