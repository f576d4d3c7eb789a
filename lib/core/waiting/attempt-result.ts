/** What one attempt of an acquire comes to, as the policy sees it (policy/acquire.ts makes it). */
import type { LockContendedError, NoQuorumError, ShuttingDownError } from '../base/errors';
import type { Lock } from '../lock/lock';
import type { AttemptOutcome, Grant } from '../store';

/** The outcome of one attempt as the policy sees it: a lock, or the error and its clean-up. */
export type AttemptResult =
  | {
      readonly lock: Lock;
      readonly cleanup?: undefined;
      /** The store's grant (a waiting policy may read its own store's fields from it). */
      readonly grant: Grant;
    }
  | {
      readonly lock?: undefined;
      readonly cleanup?: Promise<void>;
      /** ShuttingDownError: granted after the engine began to drain (released at once). */
      readonly error: LockContendedError | NoQuorumError | ShuttingDownError;
      /** Contended by one holder with a quorum: its token (see `AttemptOutcome`). */
      readonly heldBy?: string;
      /** The store's outcome (a waiting policy may read its own store's fields from it). */
      readonly outcome?: AttemptOutcome;
    };
