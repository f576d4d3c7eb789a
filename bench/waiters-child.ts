/**
 * Child process of the many-waiters scenario (bench/waiters.ts): ONE library, N callers on ONE
 * resource in this one process, each acquiring once, holding 1 ms and releasing. After the
 * window it reports grants, the longest event-loop stall (perf_hooks monitorEventLoopDelay, and
 * the longest gap between 10 ms ticks for a loop too blocked to record any sample), heap
 * growth and every process warning (e.g. MaxListenersExceededWarning), then waits to be killed:
 * the callers still waiting are never drained, which keeps the scenario bounded in time.
 * Before that, in the same process and on another resource, BASE_CALLERS callers loop acquire,
 * hold 1 ms, release for a while: the library's rate with a handful of waiters under the very
 * same conditions (this child's JIT state, --expose-gc, the loop monitor), which the many
 * waiters' rate is compared with (the target: "keep full throughput, at least that of a handful
 * of waiters").
 * Started with --expose-gc so that heap figures are after a full collection.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { benchClients, urlsFromEnv } from './clients';
import { quickFromEnv, retryProfile } from './config';
import { ContenderId, isUnavailable, makeContender } from './contenders';
import type { Contender } from './contenders';
import { sleep } from './stats';

/** What the child reports. */
export type WaitersReply =
  | {
      type: 'result';
      waiters: number;
      grants: number;
      elapsedMs: number;
      grantsPerSec: number;
      /** locks/s of BASE_CALLERS looping callers in this child, just before (see above). */
      basePerSec: number;
      maxStallMs: number;
      heapBeforeMB: number;
      heapAfterMB: number;
      heapGrowthMB: number;
      bytesPerWaiter: number;
      rssGrowthMB: number;
      warnings: string[];
      errors: number;
      firstError?: string;
    }
  | { type: 'unavailable'; reason: string };

const warnings = new Map<string, number>();
process.on('warning', (w) => {
  const key = `${w.name}: ${w.message.split('\n')[0].slice(0, 160)}`;
  warnings.set(key, (warnings.get(key) ?? 0) + 1);
});

function gc(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

const MB = 2 ** 20;
/** The handful of waiters of the baseline (as many as the 1-process contended scenario). */
const BASE_CALLERS = 16;

/** locks/s of BASE_CALLERS callers looping on `resource` for `ms` (each holds 1 ms). */
async function baseline(c: Contender, resource: string, ms: number): Promise<number> {
  let open = true;
  let locks = 0;
  const start = performance.now();
  let end = start;
  const callers = Array.from({ length: BASE_CALLERS }, async () => {
    while (open) {
      const held = await c.lock(resource).catch(() => undefined); // (gave up: try again)
      if (!held) continue;
      if (open) locks++;
      await sleep(1);
      await held.release().catch(() => undefined);
    }
  });
  await sleep(ms);
  open = false;
  end = performance.now();
  // Callers still waiting finish their acquire and stop (bounded: at most 15 s more).
  await Promise.race([Promise.allSettled(callers), sleep(15_000)]);
  return (locks / (end - start)) * 1000;
}

async function main(): Promise<void> {
  process.on('disconnect', () => process.exit(0));
  const lib = process.env.BENCH_LIB as ContenderId;
  const n = Number(process.env.BENCH_WAITERS);
  const windowMs = Number(process.env.BENCH_WINDOW_MS);
  const resource = process.env.BENCH_RESOURCE ?? 'waiters';
  const clients = await benchClients(urlsFromEnv());
  const c = await makeContender(
    lib,
    clients,
    retryProfile(process.env.BENCH_PROFILE ?? '200ms'),
    quickFromEnv(),
  );
  if (isUnavailable(c)) {
    process.send?.({ type: 'unavailable', reason: c.reason } satisfies WaitersReply);
    return;
  }
  await c.ready?.(120_000);
  for (let i = 0; i < 20; i++) await (await c.lock(`${resource}:warm:${i}`)).release();
  const basePerSec = await baseline(c, `${resource}:base`, Math.min(windowMs, 2000));

  gc();
  const heapBefore = process.memoryUsage().heapUsed;
  const rssBefore = process.memoryUsage().rss;
  const eld = monitorEventLoopDelay({ resolution: 10 });
  eld.enable();
  // A loop blocked for the whole window records no histogram sample at all: also track the
  // longest gap between 10 ms ticks, up to the moment of measuring.
  let lastTick = performance.now();
  let maxGap = 0;
  const ticker = setInterval(() => {
    const t = performance.now();
    maxGap = Math.max(maxGap, t - lastTick - 10);
    lastTick = t;
  }, 10);
  let grants = 0;
  let errors = 0;
  let firstError: string | undefined;
  let open = true;
  const start = performance.now();
  for (let i = 0; i < n; i++) {
    c.lock(resource).then(
      async (held) => {
        if (open) grants++;
        await sleep(1);
        await held.release().catch(() => undefined);
      },
      (err: unknown) => {
        errors++;
        firstError ??= err instanceof Error ? `${err.name}: ${err.message}` : String(err);
      },
    );
  }
  await sleep(windowMs);
  open = false;
  const elapsedMs = performance.now() - start;
  eld.disable();
  clearInterval(ticker);
  maxGap = Math.max(maxGap, performance.now() - lastTick - 10);
  const counted = grants;
  gc();
  const heapAfter = process.memoryUsage().heapUsed;
  const rssAfter = process.memoryUsage().rss;
  const reply: WaitersReply = {
    type: 'result',
    waiters: n,
    grants: counted,
    elapsedMs,
    grantsPerSec: (counted / elapsedMs) * 1000,
    basePerSec,
    maxStallMs: Math.max(eld.max / 1e6, maxGap),
    heapBeforeMB: heapBefore / MB,
    heapAfterMB: heapAfter / MB,
    heapGrowthMB: (heapAfter - heapBefore) / MB,
    bytesPerWaiter: (heapAfter - heapBefore) / n,
    rssGrowthMB: (rssAfter - rssBefore) / MB,
    warnings: [...warnings].map(([k, count]) => (count > 1 ? `${count}× ${k}` : k)),
    errors,
    ...(firstError ? { firstError } : {}),
  };
  process.send?.(reply);
}

main().catch((err: unknown) => {
  process.send?.({
    type: 'unavailable',
    reason: `child error: ${String(err)}`,
  } satisfies WaitersReply);
});
