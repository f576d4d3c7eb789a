/** What one attempt of an acquire comes to, as the policy sees it (policy/attempt.ts makes it). */
import type { LockContendedError, NoQuorumError, NodeVote, ShuttingDownError } from '../errors';
import type { Lock } from '../lock';

/**
 * What a granted attempt told of other engines waiting (fair mode, fair/queue-lines.ts
 * `othersWaited`; from `Grant`'s fields of the same names). Absent in the default mode.
 */
export interface GrantNews {
  /** A hand-over's grant: the release watchers the masters counted (`Grant.watchers`). */
  readonly watchers?: number;
  /** A hand-over's grant: the longest poll mark the masters had (ms, `Grant.polled`). */
  readonly polled?: number;
  /** Other engines waited in the masters' order (`Grant.othersWait`). */
  readonly othersWait?: boolean;
  /** Installed by another engine's yield or pass. */
  readonly installed?: boolean;
}

/** The outcome of one attempt as the policy sees it: a lock, or the error and its clean-up. */
export type AttemptResult =
  | (GrantNews & {
      readonly lock: Lock;
      readonly cleanup?: undefined;
      /** A hand-over's grant: every master's final vote on the take-over (`Grant.takenOver`). */
      readonly takenOver?: Promise<readonly NodeVote[]>;
    })
  | {
      readonly lock?: undefined;
      readonly cleanup?: Promise<void>;
      /** ShuttingDownError: granted after the engine began to drain (released at once). */
      readonly error: LockContendedError | NoQuorumError | ShuttingDownError;
      /** Contended by one holder with a quorum: its token (see `AttemptOutcome`). */
      readonly heldBy?: string;
      /** The wait start the attempt sent, when ordered (see `AttemptOutcome`). */
      readonly waitSince?: number;
    };
