import type { GroupReply, ScriptCall } from '../scripts/call';
import type { FoundKind } from './kind-replies';

export type { GroupReply, ScriptCall };

/**
 * A kind of lock (docs/lock-kinds.md): what it writes on one master and how a master's answer
 * is read. The quorum round, the protocol, retries, fencing and the lock's life are common to
 * every kind (quorum/, policy/); a new kind is one file like mutex.ts plus its Lua.
 */

/** What an acquire sends to one master (or one slot group of it). */
export interface AcquireInput {
  readonly token: string;
  readonly ttl: number;
  /** Lock keys of the resources (same order). */
  readonly keys: readonly string[];
  /** Fencing counter keys of the resources, when fencing is on. */
  readonly fenceKeys: readonly string[] | undefined;
  /** The master's boot-marker key, when its restart quarantine is checked. */
  readonly marker: string | undefined;
  /**
   * The marker value this master is known to have held for longer than the quarantine
   * (`MasterNode.knownBirth`): a kind whose script understands it (bootMarkerAge's `knownBirth`)
   * checks the marker without reading the clock. Kinds may ignore it and check fully.
   */
  readonly markerBirth?: string | undefined;
  /** Lifetime of a new fencing counter key (ms). */
  readonly fenceTtl: number;
  /**
   * Writer-waiting flag keys of the resources (shared locks' writer policy, docs/lock-kinds.md),
   * when flags may be read or raised: readers always, plain locks when `waitTtl` > 0.
   */
  readonly waitKeys?: readonly string[] | undefined;
  /** How long a plain lock refused by readers keeps their writer-waiting flag up (ms; 0 = none). */
  readonly waitTtl?: number | undefined;
  /** With `waitTtl`: a granted plain lock takes the flags down (AttemptRequest.clearWriterFlags). */
  readonly clearFlags?: boolean;
}

/**
 * How a release is announced to waiters (masters/handoff.ts): not, as a release, or as a
 * clean-up (the keys of a failed attempt). The fair mode adds its own (fair/fair-mutex.ts).
 */
export type Announce = false | 'release' | 'cleanup';

/** The publish flag of the release scripts for `announce` ('0', '1', '2'). */
export function announceFlag(announce: Announce): string {
  if (announce === 'cleanup') return '2';
  return announce ? '1' : '0';
}

/** One master's answer to an acquire, over all of its slot groups. */
export interface AcquireAnswer {
  /** Every key was set for us. */
  readonly granted: boolean;
  /** The youngest boot-marker age reported (ms, server clock), when checked. */
  readonly markerAge: number | undefined;
  /** Refused: the holder's remaining ttl (ms), when known. */
  readonly holderTtl: number | undefined;
  /** Refused by a plain lock: its token (kept internal: never in votes or errors). */
  readonly holder?: string;
  /** Granted with fencing: the counter per resource (order of the lock's resources). */
  readonly counters: readonly number[] | undefined;
  /**
   * Another kind of lock at one of the keys (`{-1, age, keyTtl, kind, limit}`): the request's
   * kind cannot be granted there whatever the timing — a `KindMismatchError` (errors.ts), never
   * contention. Never set together with `granted`.
   */
  readonly mismatch?: Exclude<FoundKind, { kind: 'none' }>;
}

/** One master's answer to an extension. */
export interface ExtendAnswer {
  /** `kept`: every key was ours and got the new ttl; `repaired`: a missing key was put back; `held`: not ours. */
  readonly status: 'kept' | 'repaired' | 'held';
  /** The youngest boot-marker age reported (ms), when checked (repairing extension only). */
  readonly markerAge: number | undefined;
}

/** A kind of lock. */
export interface LockKind {
  readonly name: 'mutex' | 'shared' | 'semaphore';
  /** A semaphore's limit (`undefined` for the other kinds). */
  readonly limit: number | undefined;
  /**
   * Votes a holder needs on `masters` masters, given the configured quorum (a majority by
   * default). Stated and proved per kind (docs/lock-kinds.md).
   */
  quorum(masters: number, configured: number): number;
  acquire(input: AcquireInput): ScriptCall;
  /** Reads one master's acquire reply (its slot groups, for the lock's `resources`). */
  readAcquire(groups: readonly GroupReply[], resources: readonly string[]): AcquireAnswer;
  /** Compare-and-pexpire of `token` (with `repair`: `SET NX` where the key is missing). */
  extend(
    token: string,
    ttl: number,
    keys: readonly string[],
    repair?: { marker: string | undefined; markerBirth?: string },
  ): ScriptCall;
  readExtend(groups: readonly GroupReply[], repair: boolean): ExtendAnswer;
  /**
   * Whether an extension may put back a missing key (`repairOnExtend`). Only the mutex: a holder
   * set is never re-created, its extension is a plain compare-and-pexpire of the membership.
   */
  readonly repairs: boolean;
  /**
   * Compare-and-delete of `token`; `announce` publishes the release for waiters (hand-off):
   * `'release'` as the token, `'cleanup'` (a failed attempt's keys) as `~token`.
   * `keepFor` (lockAtLeastFor): when given (ms, > 0), the keys that
   * hold `token` are not deleted but get the TTL `keepFor` (compare-and-pexpire; for holder sets:
   * the membership's expiry becomes now + keepFor), keys no longer ours are untouched, nothing
   * is published. {@link readRelease} then reads whether something of ours was kept.
   */
  release(token: string, keys: readonly string[], announce: Announce, keepFor?: number): ScriptCall;
  /** Whether one master deleted something of ours. */
  readRelease(groups: readonly GroupReply[]): boolean;
}

/** A malformed script reply: never counted as a grant. */
export class ReplyFormatError extends Error {
  constructor(script: string, value: unknown) {
    super(`unexpected reply of the ${script} script: ${JSON.stringify(value)}`);
    this.name = 'ReplyFormatError';
  }
}
