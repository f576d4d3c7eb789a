import type { LockLostError, NodeVote, RedlockError } from '../base/errors';
import type { Lock, ReleaseResult } from './lock';

/** A lock was granted. */
export interface AcquiredEvent {
  /** Discriminant: a grant. */
  readonly type: 'acquired';
  /** The resources of the lock (or of the acquire), in the caller's order. */
  readonly resources: readonly string[];
  /** The lock concerned. */
  readonly lock: Lock;
  /** Attempts made, the first included. */
  readonly attempts: number;
  /** Milliseconds from the call to the grant (including retries). */
  readonly waitTime: number;
  /** Per-master votes of the last attempt. */
  readonly votes: readonly NodeVote[];
}

/** An acquire gave up (contended, no quorum, timeout, aborted). */
export interface FailedEvent {
  /** Discriminant: an acquire that gave up. */
  readonly type: 'failed';
  /** The resources of the lock (or of the acquire), in the caller's order. */
  readonly resources: readonly string[];
  /** Why it gave up (`LockContendedError`, `NoQuorumError`, `WaitTimeoutError`, ...). */
  readonly error: RedlockError;
  /** Attempts made, the first included. */
  readonly attempts: number;
  /** Milliseconds from the call until it gave up. */
  readonly waitTime: number;
  /** Per-master votes of the last attempt. */
  readonly votes: readonly NodeVote[];
}

/** A lock was extended. */
export interface ExtendedEvent {
  /** Discriminant: a successful extension. */
  readonly type: 'extended';
  /** The resources of the lock (or of the acquire), in the caller's order. */
  readonly resources: readonly string[];
  /** The lock concerned. */
  readonly lock: Lock;
  /** The ttl the lock was extended to, in ms. */
  readonly ttl: number;
  /** Successful extensions of this lock so far, this one included. */
  readonly extensions: number;
  /** Milliseconds the extension took (one round on the masters). */
  readonly duration: number;
}

/** A lock was released. */
export interface ReleasedEvent {
  /** Discriminant: a release. */
  readonly type: 'released';
  /** The resources of the lock (or of the acquire), in the caller's order. */
  readonly resources: readonly string[];
  /** The lock concerned. */
  readonly lock: Lock;
  /** Milliseconds between grant and release. */
  readonly holdTime: number;
  /** Milliseconds the release took (until every master answered or its request timed out). */
  readonly duration: number;
  /** What each master did. */
  readonly result: ReleaseResult;
}

/** A lock ended before it was released: its validity ran out or a majority no longer held it. */
export interface LostEvent {
  /** Discriminant: a lock that ended before its release. */
  readonly type: 'lost';
  /** The resources of the lock (or of the acquire), in the caller's order. */
  readonly resources: readonly string[];
  /** The lock concerned. */
  readonly lock: Lock;
  /** Milliseconds between grant and loss. */
  readonly holdTime: number;
  /** Why the lock ended (expiry, lost extension, shutdown). */
  readonly reason: LockLostError;
}

/**
 * A master's clock jumped (or is off the other masters' by more than `clockTolerance`): its
 * votes do not count for {@link quarantine} ms, and the
 * locks the engine held that needed its vote were re-checked — those left without a quorum
 * were lost (a `lost` event each, emitted before this one). See docs/guarantees.md, "Clock jumps".
 */
export interface ClockJumpEvent {
  /** Discriminant: a master's clock that cannot be trusted. */
  readonly type: 'clock-jump';
  /** The master's position in the client list. */
  readonly node: number;
  /** Its redacted address. */
  readonly name: string;
  /** How far its clock moved beyond the drift allowance (or is off the others), ms; + forward. */
  readonly jump: number;
  /** `jumped`: against the engine's monotonic clock; `disagrees`: off the other masters' clocks. */
  readonly cause: 'jumped' | 'disagrees';
  /** How long its votes do not count, ms. */
  readonly quarantine: number;
  /** Locks of this engine lost because of it. */
  readonly lost: number;
}

/** Everything the engine reports to observers (see `Redlock.observe`). */
export type RedlockEvent =
  AcquiredEvent | FailedEvent | ExtendedEvent | ReleasedEvent | LostEvent | ClockJumpEvent;

/** Receives engine events. Called synchronously; must not throw (errors are logged and ignored). */
export type RedlockObserver = (event: RedlockEvent) => void;
