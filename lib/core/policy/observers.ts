import { monotonicNow } from '../base/clock';
import { LockOperationError, RedlockError } from '../base/errors';
import type { RedlockEvent, RedlockObserver } from '../lock/events';
import type { Lock, LockLossListener, LockState } from '../lock/lock';
import type { LockLostError } from '../base/errors';
import type { RedlockLogger } from '../base/settings';

/**
 * The engine's observers (metrics, logs, tracing): costs nothing while nobody observes
 * ({@link active} is checked before any event object is built). An observer that throws is
 * logged, never fatal.
 */
export class Observers implements LockLossListener {
  private readonly set = new Set<RedlockObserver>();

  constructor(
    private readonly logger: RedlockLogger,
    private readonly describe: (err: unknown) => string,
  ) {}

  /** Whether anybody listens. */
  get active(): boolean {
    return this.set.size > 0;
  }

  /** Adds an observer; returns a function that removes it. */
  add(observer: RedlockObserver): () => void {
    this.set.add(observer);
    return () => this.set.delete(observer);
  }

  /** Tells every observer about `event`. */
  emit(event: RedlockEvent): void {
    for (const observer of this.set) {
      try {
        observer(event);
      } catch (err) {
        this.logger.warn(`Redlock: an observer threw: ${this.describe(err)}`);
      }
    }
  }

  /** Reports a lock found lost (a `lost` event): every lock of the engine tells it here. */
  lost(lock: Lock, state: LockState, reason: LockLostError): void {
    if (!this.active) return;
    this.emit({
      type: 'lost',
      resources: lock.resources,
      lock,
      holdTime: monotonicNow() - state.acquiredAt,
      reason,
    });
  }

  /** Reports a failed acquire (only engine errors: a bad argument is not an attempt). */
  failed(resources: readonly string[], err: unknown, started: number): void {
    if (!this.active || !(err instanceof RedlockError)) return;
    const detail = err instanceof LockOperationError ? err : undefined;
    this.emit({
      type: 'failed',
      resources,
      error: err,
      attempts: detail?.attempts ?? 0,
      waitTime: monotonicNow() - started,
      votes: detail?.votes ?? [],
    });
  }
}
