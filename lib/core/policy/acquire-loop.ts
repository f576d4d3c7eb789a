import { monotonicNow } from '../clock';
import {
  LockAbortedError,
  LockContendedError,
  ShuttingDownError,
  WaitTimeoutError,
} from '../errors';
import type { LockErrorDetail, NoQuorumError } from '../errors';
import type { Lock } from '../lock';
import type { CheckedAcquire } from '../request';
import { MAX_TIMER_MS } from '../settings';
import { onAbort } from '../wake';
import type { LockStore, ReleaseWaiter } from './store';

/** The outcome of one attempt as the policy sees it: a lock, or the error and its clean-up. */
export type AttemptResult =
  | { readonly lock: Lock; readonly cleanup?: undefined }
  | {
      readonly lock?: undefined;
      readonly cleanup?: Promise<void>;
      /** ShuttingDownError: granted after the engine began to drain (released at once). */
      readonly error: LockContendedError | NoQuorumError | ShuttingDownError;
    };

/** What the acquire loop needs from the engine. */
export interface LoopContext {
  readonly store: LockStore;
  /** Aborted when the engine drains: refuses new attempts, wakes waiting ones. */
  readonly draining: AbortSignal;
  /** One attempt (the store's round, turned into a lock or an error). */
  attempt(req: CheckedAcquire, attemptNo: number, startedAt: number): Promise<AttemptResult>;
}

/**
 * Retries an acquire (docs/REDLOCK.md, "N masters", last paragraph): attempts until granted, until
 * `retryCount` retries were made or `waitTimeout` passed, waiting a random delay between attempts
 * — shorter when the holder's key expires sooner, and cut short by the holder's release
 * announcement (hand-off) when the store announces releases. A failed attempt's clean-up is
 * awaited before its error is surfaced.
 */
export async function acquireLoop(
  ctx: LoopContext,
  req: CheckedAcquire,
  start: number,
): Promise<Lock> {
  const deadline = req.waitTimeout === undefined ? Infinity : start + req.waitTimeout;
  let attempts = 0;
  let waiter: ReleaseWaiter | undefined;
  let subscribed = false;
  let last: AttemptResult | undefined;
  const detail = (): LockErrorDetail => ({
    resources: req.resources,
    votes: last?.lock ? [] : (last?.error.votes ?? []),
    attempts,
    elapsed: monotonicNow() - start,
  });
  try {
    for (;;) {
      if (req.signal?.aborted) {
        await last?.cleanup;
        throw new LockAbortedError(detail(), { cause: req.signal.reason });
      }
      if (ctx.draining.aborted) {
        await last?.cleanup;
        throw new ShuttingDownError(detail());
      }
      attempts++;
      last = await ctx.attempt(req, attempts, start);
      if (last.lock) return last.lock;
      const left = deadline - monotonicNow();
      if (attempts > req.retryCount) break;
      if (left <= 0) {
        await last.cleanup;
        throw new WaitTimeoutError(
          { ...detail(), waitTimeout: req.waitTimeout ?? 0 },
          { cause: last.error },
        );
      }
      const contended = last.error instanceof LockContendedError;
      if (contended && !subscribed) {
        // Listen for the holder's release, then retry at once: a release that happened before
        // the subscription became active cannot be missed.
        subscribed = true;
        const subscription = await ctx.store.subscribe(req.resources, start);
        waiter = subscription?.waiter;
        if (subscription?.fresh) continue;
      }
      let wait = req.retryDelay + (Math.random() * 2 - 1) * req.retryJitter;
      const holderTtl = contended ? (last.error as LockContendedError).retryAfter : undefined;
      if (holderTtl !== undefined) wait = Math.min(wait, holderTtl + 1);
      wait = Math.max(0, Math.min(wait, left, MAX_TIMER_MS));
      const waking = wakeSignal(req.signal, ctx.draining);
      try {
        if (waiter) await waiter.wait(wait, waking.signal);
        else await ctx.store.pause(wait, waking.signal);
      } finally {
        waking.dispose();
      }
    }
    await last.cleanup;
    throw last.error;
  } finally {
    waiter?.done();
  }
}

/**
 * The signal a wait between attempts listens to: the caller's (if any) or the engine's drain,
 * whichever aborts first. Allocates only when the caller passed a signal.
 */
function wakeSignal(
  signal: AbortSignal | undefined,
  drain: AbortSignal,
): { signal: AbortSignal; dispose(): void } {
  if (!signal) return { signal: drain, dispose: () => undefined };
  const both = new AbortController();
  const wake = (): void => both.abort();
  // Both signals may be shared by many waiters: one listener each, fanned out (wake.ts).
  const stopCaller = onAbort(signal, wake);
  const stopDrain = onAbort(drain, wake);
  return {
    signal: both.signal,
    dispose: () => {
      stopCaller();
      stopDrain();
    },
  };
}
