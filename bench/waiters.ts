/**
 * Many waiters: one child process per library and round (bench/waiters-child.ts), so that heap,
 * event-loop stalls and warnings belong to that library alone. The child is killed once it has
 * reported (or at a deadline), whatever is still waiting: bounded in time.
 */
import { forkBench, nextMessage } from './multiproc';
import type { ContenderId } from './contenders';
import type { WaitersReply } from './waiters-child';

/** Runs `lib` with `waiters` callers on one resource for `windowMs`; the child's report. */
export async function manyWaiters(
  urls: readonly string[],
  lib: ContenderId,
  profile: string,
  waiters: number,
  windowMs: number,
  resource: string,
): Promise<WaitersReply> {
  const child = forkBench(
    'waiters-child.ts',
    urls,
    {
      BENCH_LIB: lib,
      BENCH_PROFILE: profile,
      BENCH_WAITERS: String(waiters),
      BENCH_WINDOW_MS: String(windowMs),
      BENCH_RESOURCE: resource,
    },
    ['--expose-gc'],
  );
  try {
    // Start-up (ts-node, connections) + window + a stalled loop's lateness, then give up.
    return await nextMessage<WaitersReply>(child, windowMs + 90_000);
  } catch (err) {
    return {
      type: 'unavailable',
      reason: `no report: ${err instanceof Error ? err.message : String(err)}`,
    };
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}
