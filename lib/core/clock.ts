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

/** A duration for humans: `850 ms`, `3 s` (rounded up). */
export function formatMs(ms: number): string {
  return ms < 1000 ? `${Math.ceil(ms)} ms` : `${Math.ceil(ms / 1000)} s`;
}
