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
  /**
   * Poll-mark keys of the resources (kind-keys.ts `pollKey`; plain locks, with the `waitKeys`):
   * raised for `waitTtl` ms by a plain lock refused by another plain lock, read by a hand-over.
   */
  readonly pollKeys?: readonly string[] | undefined;
  /**
   * A local hand-over (fair/handover.ts; mutex only): the token of this process's releasing
   * holder — keys holding it count as free and are overwritten. Other kinds never get one.
   */
  readonly handoverFrom?: string | undefined;
  /**
   * Defer to pollers (fair/streak.ts; mutex only, with the `pollKeys`): a free key on which
   * another engine's poll mark is up refuses the attempt instead of being taken, and the mark
   * gets this engine's id appended (kinds/mutex-scripts.ts FAIR_ACQUIRE_SCRIPT, `defer`).
   */
  readonly defer?: boolean | undefined;
  /**
   * Ordered yields (fair/streak.ts; mutex only, one resource, with the `pollKeys`): the order
   * key (kind-keys.ts `orderKey`) and when this engine began to wait for the resource (wall
   * ms): a refusal by another engine's lock enters the engine there, a grant removes it, and a
   * free key reserved for another engine by a yield refuses (kinds/mutex-scripts.ts FAIR_ACQUIRE_SCRIPT).
   */
  readonly orderKeys?: readonly string[] | undefined;
  readonly waitSince?: number | undefined;
  /**
   * Hand-over across processes (with the `orderKeys`): the park key (kind-keys.ts `parkKey`)
   * and this engine's next token for the resource, parked there by a refusal for `life` ms;
   * `alive`, the prefix of the engines' alive channels (kind-keys.ts `aliveChannel`; '' on a
   * Cluster): a free key goes to the order's head when it parked there and is alive
   * (kinds/mutex-scripts.ts FAIR_ACQUIRE_SCRIPT).
   */
  readonly park?: {
    readonly key: string;
    readonly token: string;
    readonly life: number;
    readonly alive: string;
  };
}

/**
 * Ordered yields (fair/streak.ts): the order keys of a yield's lock keys (kind-keys.ts
 * `orderKey`, one per lock key), how long (ms) the yield reserves them for the engine that has
 * waited longest, and since when (wall ms) the yielding engine's own waiters wait: it joins the
 * order with that score. Kinds without an order ignore it.
 */
export interface YieldOrder {
  readonly keys: readonly string[];
  readonly reserveMs: number;
  /** A yield: since when the yielding engine's local waiters wait (wall ms). A pass: none. */
  readonly since: number | undefined;
  /** How long (ms) the order lives at least after the yield (it may have been made by it). */
  readonly keepMs: number;
  /**
   * Hand-over across processes: the park key, the yielding engine's own next token (parked
   * with `ttl` for `life` ms; '' none), and what an install needs: the fencing counter key
   * (when fencing), its ttl, and the boot marker key (when checked).
   */
  readonly install?: {
    readonly parkKey: string;
    readonly token: string;
    readonly ttl: number;
    readonly life: number;
    readonly fenceKey: string | undefined;
    readonly fenceTtl: number;
    readonly marker: string | undefined;
    /** The alive channels' prefix (kinds/kind-keys.ts `aliveChannel`); '' not checked. */
    readonly alive: string;
    /**
     * The token whose yield or pass installed the releasing lock (Grant.installedBy; '' none):
     * a master whose key still holds it has not run that release yet (scripts/release.ts).
     */
    readonly after: string;
  };
}

/**
 * How a release is announced to waiters (masters/handoff.ts): not, as a release, as a clean-up,
 * as a yield (a plain lock's holder lets other processes go first: fair/fair-queue.ts), or
 * as a pass (a plain lock released while other engines wait for it goes to the one that waited
 * longest, like a yield's, without the releasing engine joining the order: a release when none
 * waits; fair/fair-queue.ts `announceAs`).
 */
export type Announce = false | 'release' | 'cleanup' | 'yield' | 'pass';

/** The publish flag of the release scripts for `announce` ('0', '1', '2', '3', '4'). */
export function announceFlag(announce: Announce): string {
  if (announce === 'cleanup') return '2';
  if (announce === 'yield') return '3';
  if (announce === 'pass') return '4';
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
   * Granted by a local hand-over (mutex only): the most subscriber connections any of the
   * resources' release channels has on this master — this engine's own watch included
   * (fair/fair-queue.ts: whether another engine waits).
   */
  readonly watchers?: number;
  /**
   * Granted by a local hand-over: the longest remaining poll mark of the resources on this master
   * (ms; 0 or absent when none): a plain lock of another engine polls for them (kind-keys.ts).
   */
  readonly polled?: number;
  /**
   * Granted while other engines wait for the resource in the masters' order (mutex, one
   * resource: FAIR_ACQUIRE_SCRIPT's `{2, age, …}`): the lock's release is a pass
   * (fair/fair-queue.ts `announceAs`), not a plain release that its own process could win.
   */
  readonly othersWait?: boolean;
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
  release(
    token: string,
    keys: readonly string[],
    announce: Announce,
    keepFor?: number,
    order?: YieldOrder,
  ): ScriptCall;
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
