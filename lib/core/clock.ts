import { performance } from 'node:perf_hooks';
import { onAbort } from './wake';

/**
 * Milliseconds from a monotonic clock. Never goes backwards when the wall clock is adjusted;
 * all elapsed-time and validity arithmetic in the engine uses it (docs/REDLOCK.md, "N masters", step 1).
 */
export function monotonicNow(): number {
  return performance.now();
}

/**
 * Resolves after `ms`, or rejects with the signal's reason once it aborts. Leaves no timer. Any
 * number of concurrent delays may share one signal (see {@link onAbort}).
 */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      stop();
      resolve();
    }, ms);
    const stop = signal
      ? onAbort(signal, () => {
          clearTimeout(timer);
          reject(signal.reason);
        })
      : () => undefined;
  });
}

/**
 * Calls `fn` once the I/O that is already waiting has been read: from the event loop's check
 * phase, which follows its poll phase (a busy process must not turn its own backlog
 * into missed per-node timeouts: test/core/busy-loop.spec.ts). A timer that comes due while the loop was blocked
 * fires in the timers phase, before the poll phase reads the sockets; replies that arrived
 * meanwhile, inside the per-node timeout, would be counted as timeouts. Per-node timeouts end
 * through this: the replies already received are counted first. It adds one loop turn (no I/O
 * wait: the poll phase does not block while a check callback is pending), nothing on an idle loop.
 */
export function afterPendingIo(fn: () => void): void {
  setImmediate(fn);
}

/** A duration for humans: `850 ms`, `3 s` (rounded up). */
export function formatMs(ms: number): string {
  return ms < 1000 ? `${Math.ceil(ms)} ms` : `${Math.ceil(ms / 1000)} s`;
}

/**
 * Drift allowance for a ttl (docs/REDLOCK.md, "N masters" step 4): ttl × driftFactor + 2 ms —
 * how far the masters' and this process's clocks may disagree over the ttl.
 */
export function driftFor(ttl: number, driftFactor: number): number {
  return Math.floor(ttl * driftFactor) + 2;
}
