import type { GroupReply, ScriptCall } from '../scripts/call';
import type { FoundKind } from '../../base/kind-spec';

export type { GroupReply, ScriptCall };

/**
 * A kind of lock (docs/lock-kinds.md): what it writes on one master and how a master's answer
 * is read — the {@link LockKind} contract, and the typed decoding of the replies the kinds'
 * scripts share. The quorum round, the protocol, retries, fencing and the lock's life are
 * common to every kind (quorum/, policy/); a new kind is one file like mutex.ts plus its Lua.
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
   * The clock check is on (redis/masters/clock-watch.ts): a kind whose script can read the
   * master's TIME sends it with the reply (`ScriptCall.clocked`); the others' masters are sent a
   * TIME of their own.
   */
  readonly clock?: boolean;
}

/**
 * How a release is announced to waiters (redis/masters/handoff.ts): not, as a release, or as a
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
   * kind cannot be granted there whatever the timing — a `KindMismatchError` (base/errors.ts), never
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
  /**
   * Compare-and-pexpire of `token` (with `repair`: `SET NX` where the key is missing). `clock`:
   * as {@link AcquireInput.clock}.
   */
  extend(
    token: string,
    ttl: number,
    keys: readonly string[],
    repair?: { marker: string | undefined; markerBirth?: string },
    clock?: boolean,
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

// The replies (shapes: docs/lock-kinds.md, "Replies"). Each decoder checks the whole shape and
// throws a ReplyFormatError naming the script on anything else, so that a wrong script, a wrong
// argument layout or a proxy's garbage never turns into a vote. Every client adapter
// (lib/core/redis/connection/) returns Lua integers as numbers and Lua strings as strings under RESP2
// and RESP3.

/**
 * Reply of SEMAPHORE_ACQUIRE_SCRIPT, SHARED_ACQUIRE_SCRIPT and WRITE_ACQUIRE_SCRIPT. `granted`
 * and `held` are the two shapes of ACQUIRE_SCRIPT ({1, age, ...fencing} / {0, age, pttl});
 * `mismatch` ({-1, age, pttl, kind, limit}) is another kind at one of the keys.
 */
export type KindAcquireReply =
  | { readonly status: 'granted'; readonly markerAge: number; readonly fencing: number[] }
  | { readonly status: 'held'; readonly markerAge: number; readonly holderTtl: number }
  | {
      readonly status: 'mismatch';
      readonly markerAge: number;
      readonly holderTtl: number;
      readonly found: Exclude<FoundKind, { kind: 'none' }>;
    };

/** Reply of INSPECT_READ_SCRIPT (redis/scripts/inspect.ts), its first five fields. */
export interface InspectReply {
  readonly found: FoundKind;
  /** Live holders at this master (a mutex counts 1). */
  readonly holders: number;
  /** ms until the last live holder expires; 0 when free, -1 for a string without TTL. */
  readonly ttl: number;
  /** ms the writer-waiting flag still lives; 0 when absent. */
  readonly waiting: number;
}

/**
 * A malformed script reply: never counted as a grant. The message shows at most 200 characters
 * of the reply.
 */
export class ReplyFormatError extends Error {
  constructor(script: string, reply: unknown) {
    let text: string;
    try {
      text = JSON.stringify(reply) ?? String(reply);
    } catch {
      text = String(reply);
    }
    if (text.length > 200) text = `${text.slice(0, 200)}…`;
    super(`Malformed reply of the ${script} script: ${text}`);
    this.name = 'ReplyFormatError';
  }
}

function isInt(x: unknown, min: number): x is number {
  return typeof x === 'number' && Number.isSafeInteger(x) && x >= min;
}

/** `markerAge` of an acquire reply when the boot marker was not checked. */
export const MARKER_UNCHECKED = -1;
/**
 * `markerAge` of an acquire reply when the boot marker still held the value the engine knows to
 * be older than the quarantine (bootMarkerAge's one-GET path, lib/core/redis/scripts/lua.ts).
 */
export const MARKER_KNOWN_OLD = -2;

/**
 * The boot marker's age (ms) an acquire reply reports, as the quarantine reads it: `undefined`
 * when it was not checked ({@link MARKER_UNCHECKED}) or is known to be old
 * ({@link MARKER_KNOWN_OLD}) — neither holds the vote back; any other negative value is a marker
 * born after the server's clock (the clock was set back), read as 0: a young data set.
 */
export function markerAgeOf(raw: number): number | undefined {
  if (raw === MARKER_UNCHECKED || raw === MARKER_KNOWN_OLD) return undefined;
  return raw < 0 ? 0 : raw;
}

function parseKind(name: unknown, limit: unknown): FoundKind | undefined {
  if (typeof name !== 'string' || !isInt(limit, 0)) return undefined;
  if (name === 'none' || name === 'mutex' || name === 'shared') {
    return limit === 0 ? { kind: name } : undefined;
  }
  if (name === 'semaphore') return limit >= 1 ? { kind: 'semaphore', limit } : undefined;
  if (name.startsWith('foreign:') && name.length > 8 && limit === 0) {
    return { kind: 'foreign', redisType: name.slice(8) };
  }
  return undefined;
}

/**
 * Decodes an acquire reply. `fencingCounters`: how many counters a granted reply carries (the
 * number of resources when fencing is on, else 0). `markerAge` is the script's raw value, any
 * integer: {@link markerAgeOf} reads it.
 */
export function decodeKindAcquire(reply: unknown, fencingCounters: number): KindAcquireReply {
  const bad = (): Error => new ReplyFormatError('acquire', reply);
  if (!Array.isArray(reply) || reply.length < 2) throw bad();
  const [status, markerAge] = reply as unknown[];
  if (!isInt(markerAge, Number.MIN_SAFE_INTEGER)) throw bad();
  if (status === 1) {
    const fencing = reply.slice(2) as unknown[];
    // 0: a data set too young to start a counter (redis/scripts/fencing.ts YOUNG_DATA_SET_MS).
    if (fencing.length !== fencingCounters || !fencing.every((v) => isInt(v, 0))) throw bad();
    return { status: 'granted', markerAge, fencing: fencing as number[] };
  }
  const holderTtl: unknown = reply[2];
  if (!isInt(holderTtl, 0)) throw bad();
  // A plain lock's refusal may add the holder's token (redis/kinds/mutex.ts ACQUIRE_SCRIPT).
  if (
    status === 0 &&
    (reply.length === 3 || (reply.length === 4 && typeof reply[3] === 'string'))
  ) {
    return { status: 'held', markerAge, holderTtl };
  }
  if (status === -1 && reply.length === 5) {
    const found = parseKind(reply[3], reply[4]);
    if (!found || found.kind === 'none') throw bad();
    return { status: 'mismatch', markerAge, holderTtl, found };
  }
  throw bad();
}

/** Decodes an extend reply (1 = every key extended, 0 = not ours anywhere or lost). */
export function decodeKindExtend(reply: unknown): boolean {
  if (reply === 1) return true;
  if (reply === 0) return false;
  throw new ReplyFormatError('extend', reply);
}

/** Decodes a release reply: the number of keys where a live membership was removed. */
export function decodeKindRelease(reply: unknown, keys: number): number {
  if (isInt(reply, 0) && reply <= keys) return reply;
  throw new ReplyFormatError('release', reply);
}

/** Decodes an inspect reply. */
export function decodeInspect(reply: unknown): InspectReply {
  const bad = (): Error => new ReplyFormatError('inspect', reply);
  if (!Array.isArray(reply) || reply.length !== 5) throw bad();
  const [name, holders, ttl, limit, waiting] = reply as unknown[];
  const found = parseKind(name, limit);
  if (!found || !isInt(holders, 0) || !isInt(ttl, -1) || !isInt(waiting, 0)) throw bad();
  const consistent =
    found.kind === 'none'
      ? holders === 0 && ttl === 0
      : found.kind === 'mutex'
        ? holders === 1
        : found.kind === 'foreign'
          ? holders === 0
          : (holders === 0) === (ttl === 0) && ttl >= 0;
  if (!consistent) throw bad();
  return { found, holders, ttl, waiting };
}
