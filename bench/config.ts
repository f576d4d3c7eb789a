/**
 * Benchmark settings shared by the runner and its child processes: the lock settings every
 * library gets, the two retry profiles of the contended scenarios, and full/quick mode.
 */

/** Settings every library gets (where it has the knob), whatever the retry profile. */
export const BENCH_SETTINGS = Object.freeze({
  /** Lock ttl in ms. */
  ttl: 10_000,
  /** High enough that no acquire of a contended scenario gives up inside its window. */
  retryCount: 10_000,
  /** Clock drift factor. */
  driftFactor: 0.01,
});

/** Worker processes of the multi-process scenarios (bench/topology.ts). */
export const PROCESSES = 4;
/** Callers per worker process of the 4 × 4 scenario. */
export const CALLERS_PER_PROCESS = 4;
/**
 * Callers per process of the few-callers scenario (same worker processes): every process's queue
 * is empty at each release, so no local hand-over hides a library's unfairness across processes.
 */
export const FEW_CALLERS = 1;

/** Delay between attempts on contention, identical for every library that has the setting. */
export interface RetryProfile {
  /** Short id used in tables, tags and JSON: `'10ms'`, `'200ms'`. */
  readonly id: string;
  /** Base delay between attempts (ms). */
  readonly retryDelay: number;
  /** Random ± spread of the delay (ms); libraries without jitter get only `retryDelay`. */
  readonly retryJitter: number;
}

/** 10 ms ± 10 ms: the short retry delay of the contended scenarios. */
export const FAST_RETRY: RetryProfile = Object.freeze({
  id: '10ms',
  retryDelay: 10,
  retryJitter: 10,
});
/** 200 ms ± 100 ms: node-redlock's and our defaults. */
export const SLOW_RETRY: RetryProfile = Object.freeze({
  id: '200ms',
  retryDelay: 200,
  retryJitter: 100,
});
export const RETRY_PROFILES: readonly RetryProfile[] = [FAST_RETRY, SLOW_RETRY];

/** The retry profile with id `id`. */
export function retryProfile(id: string): RetryProfile {
  const p = RETRY_PROFILES.find((r) => r.id === id);
  if (!p) throw new Error(`unknown retry profile ${id}`);
  return p;
}

/**
 * `maxTtl` of our engine. Our engine runs with its full safety defaults (fencing on, restart
 * quarantine on); the quarantine keeps a master out of the vote until its data set is older than
 * `maxTtl × (1 + driftFactor) + 2` ms, and every master here was just started by the benchmark,
 * so the run waits that long before measuring. A full run keeps the default `maxTtl` (60 s: a
 * ~61 s wait); quick mode sets `maxTtl` to the benchmark's ttl (10 s: a ~10 s wait). The per-lock
 * work (the marker check in the acquire script) is the same either way.
 */
export function maxTtlFor(quick: boolean): number | undefined {
  return quick ? BENCH_SETTINGS.ttl : undefined;
}

/** Quick mode: `--quick` or `BENCH_QUICK=1`. */
export function quickFromEnv(): boolean {
  const v = process.env.BENCH_QUICK;
  return v !== undefined && v !== '' && v !== '0' && v !== 'false';
}

/** Absolute wall-clock time in ms with sub-ms resolution, comparable across processes. */
export function absNow(): number {
  return performance.timeOrigin + performance.now();
}
