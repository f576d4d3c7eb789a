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

/**
 * The key prefix of the HTTP scenario's server (bench/http-server.ts). The restart quarantine is
 * per key prefix (its boot marker lives under the prefix), and a prefix that never held a marker
 * on a master is quarantined from the first check of it, however long the master has run: the
 * runner makes that first check while it waits out the other libraries' quarantine
 * (topology.ts), and the server waits until none of its masters is quarantined before it takes
 * load (without both, every `@Locked` request of the scenario was answered 503).
 */
export const HTTP_KEY_PREFIX = 'bench:http:';

/** What {@link untilTrusted} reads: an engine's `health()`. */
export interface HealthSource {
  health(): Promise<{ readonly masters: readonly { reachable: boolean; quarantined: boolean }[] }>;
}

/**
 * Polls `engine.health()` until every master is reachable and out of restart quarantine; throws
 * after `deadlineMs`.
 */
export async function untilTrusted(engine: HealthSource, deadlineMs: number): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const h = await engine.health();
    if (h.masters.every((m) => m.reachable && !m.quarantined)) return;
    if (Date.now() > deadline)
      throw new Error(`masters still in restart quarantine after ${deadlineMs} ms`);
    await new Promise((r) => setTimeout(r, 250));
  }
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
