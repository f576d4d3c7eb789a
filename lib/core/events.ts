import type { LockLostError, NodeVote, RedlockError } from './errors';
import type { Lock, ReleaseResult } from './lock';

/** A lock was granted. */
export interface AcquiredEvent {
  readonly type: 'acquired';
  readonly resources: readonly string[];
  readonly lock: Lock;
  readonly attempts: number;
  /** Milliseconds from the call to the grant (including retries). */
  readonly waitTime: number;
  readonly votes: readonly NodeVote[];
}

/** An acquire gave up (contended, no quorum, timeout, aborted). */
export interface FailedEvent {
  readonly type: 'failed';
  readonly resources: readonly string[];
  readonly error: RedlockError;
  readonly attempts: number;
  readonly waitTime: number;
  readonly votes: readonly NodeVote[];
}

/** A lock was extended. */
export interface ExtendedEvent {
  readonly type: 'extended';
  readonly resources: readonly string[];
  readonly lock: Lock;
  readonly ttl: number;
  readonly extensions: number;
  /** Milliseconds the extension took (one round on the masters). */
  readonly duration: number;
}

/** A lock was released. */
export interface ReleasedEvent {
  readonly type: 'released';
  readonly resources: readonly string[];
  readonly lock: Lock;
  /** Milliseconds between grant and release. */
  readonly holdTime: number;
  /** Milliseconds the release took (until a majority answered, or all when closing). */
  readonly duration: number;
  readonly result: ReleaseResult;
}

/** A lock ended before it was released: its validity ran out or a majority no longer held it. */
export interface LostEvent {
  readonly type: 'lost';
  readonly resources: readonly string[];
  readonly lock: Lock;
  readonly holdTime: number;
  readonly reason: LockLostError;
}

/** Everything the engine reports to observers (see `Redlock.observe`). */
export type RedlockEvent = AcquiredEvent | FailedEvent | ExtendedEvent | ReleasedEvent | LostEvent;

/** Receives engine events. Called synchronously; must not throw (errors are logged and ignored). */
export type RedlockObserver = (event: RedlockEvent) => void;
