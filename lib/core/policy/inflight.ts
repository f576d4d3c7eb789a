import { monotonicNow } from '../clock';
import { ShuttingDownError } from '../errors';
import { lockState } from '../lock';
import type { Lock } from '../lock';
import type { CheckedAcquire } from '../request';
import type { AttemptResult } from './attempt-result';
import { releaseLock } from './release';
import type { ReleaseContext } from './release';

/**
 * Attempts on the wire, and the clean-up they started (an acquire in flight during
 * `close()`). The engine's `close()` waits for them, so that no grant arrives — and no key is
 * written — after it resolved; a grant that arrives while the engine drains is refused and
 * released by the engine (see `Redlock.refuseLate`).
 */
export class InflightAttempts {
  private readonly pending = new Set<Promise<unknown>>();

  /** Tracks `attempt` until it and its clean-up settled; returns it unchanged. */
  track(attempt: Promise<AttemptResult>): Promise<AttemptResult> {
    const settled: Promise<unknown> = attempt.then(
      (r) => r.cleanup,
      () => undefined,
    );
    this.pending.add(settled);
    void settled.finally(() => this.pending.delete(settled));
    return attempt;
  }

  /** Resolves once no attempt is in flight (also those started while waiting). */
  async settled(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }
}

/**
 * A grant that arrived after the engine began to drain: never handed out (the caller gets
 * {@link ShuttingDownError}); its keys are deleted on every master at once (no lockAtLeastFor:
 * nobody ever held it).
 */
export function refuseLate(
  ctx: ReleaseContext,
  lock: Lock,
  req: CheckedAcquire,
  attempts: number,
  startedAt: number,
): AttemptResult {
  const cleanup = releaseLock(ctx, lock, lockState(lock), true).then(
    () => undefined,
    () => undefined,
  );
  const error = new ShuttingDownError({
    resources: req.resources,
    votes: [],
    attempts,
    elapsed: monotonicNow() - startedAt,
  });
  return { error, cleanup };
}
