import { monotonicNow } from '../base/clock';
import { NoQuorumError } from '../base/errors';
import { expire } from '../lock/lock';
import type { Lock, LockState } from '../lock/lock';
import { effectiveThreshold, errorMessage } from '../base/validate';

/** What keep-alive needs from the engine. */
export interface KeepAliveContext {
  extend(lock: Lock): Promise<Lock>;
  readonly maxExtensions: number;
  /** Default threshold (ms of validity left at which to extend). */
  readonly extendThreshold: number | undefined;
  readonly retryDelay: number;
  readonly requestTimeout: number;
}

/**
 * Extends `lock` before it expires (bounded by `maxExtensions`, never back to back: at most half
 * the ttl ahead); the lock's signal aborts when an extension fails. A round without a quorum (a
 * slow moment, not a lost lock) is retried twice at most, only while a retry can still finish in
 * time. Returns a function that stops it.
 */
export function keepAlive(
  ctx: KeepAliveContext,
  lock: Lock,
  s: LockState,
  extendThreshold: number | undefined,
): () => void {
  const signal = lock.signal; // arms the expiry timer that aborts at the validity deadline
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let retries = 0;
  const arm = (): void => {
    if (stopped || signal.aborted || s.released) return;
    if (s.extensions >= ctx.maxExtensions) return; // the expiry timer aborts at the deadline
    const threshold = effectiveThreshold(s.ttl, extendThreshold ?? ctx.extendThreshold);
    const left = s.validUntil - monotonicNow();
    timer = setTimeout(run, Math.max(0, left - threshold));
  };
  const run = (): void => {
    timer = undefined;
    if (stopped) return;
    ctx.extend(lock).then(
      () => {
        retries = 0;
        arm();
      },
      (err: unknown) => {
        if (stopped) return;
        const left = s.validUntil - monotonicNow();
        if (err instanceof NoQuorumError && retries < 2 && left > 2 * ctx.requestTimeout) {
          retries++;
          timer = setTimeout(run, Math.min(ctx.retryDelay / 4, left / 4));
          return;
        }
        expire(lock, s, `extension failed: ${errorMessage(err)}`, err);
      },
    );
  };
  arm();
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
  };
}
