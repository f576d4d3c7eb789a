/**
 * Typed decoding of the lock-kind scripts' replies (shapes: docs/lock-kinds.md, "Replies").
 * Each decoder checks the whole shape and throws a plain Error naming the script on anything
 * else, so that a wrong script, a wrong argument layout or a proxy's garbage never turns into a
 * vote. Every client adapter (lib/core/connection/) returns Lua integers as numbers and Lua
 * strings as strings under RESP2 and RESP3.
 */

import type { FoundKind } from '../kind-spec';

export type { FoundKind };

/** The lock kinds. */
export type KindName = 'mutex' | 'shared' | 'semaphore';

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

/** Reply of INSPECT_READ_SCRIPT (scripts/inspect.ts), its first five fields. */
export interface InspectReply {
  readonly found: FoundKind;
  /** Live holders at this master (a mutex counts 1). */
  readonly holders: number;
  /** ms until the last live holder expires; 0 when free, -1 for a string without TTL. */
  readonly ttl: number;
  /** ms the writer-waiting flag still lives; 0 when absent. */
  readonly waiting: number;
}

function malformed(script: string, reply: unknown): Error {
  let text: string;
  try {
    text = JSON.stringify(reply) ?? String(reply);
  } catch {
    text = String(reply);
  }
  if (text.length > 200) text = `${text.slice(0, 200)}…`;
  return new Error(`Malformed reply of the ${script} script: ${text}`);
}

function isInt(x: unknown, min: number): x is number {
  return typeof x === 'number' && Number.isSafeInteger(x) && x >= min;
}

/** `markerAge` of an acquire reply when the boot marker was not checked. */
export const MARKER_UNCHECKED = -1;
/**
 * `markerAge` of an acquire reply when the boot marker still held the value the engine knows to
 * be older than the quarantine (bootMarkerAge's one-GET path, lib/core/scripts/lua.ts).
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
  const bad = (): Error => malformed('acquire', reply);
  if (!Array.isArray(reply) || reply.length < 2) throw bad();
  const [status, markerAge] = reply as unknown[];
  if (!isInt(markerAge, Number.MIN_SAFE_INTEGER)) throw bad();
  if (status === 1) {
    const fencing = reply.slice(2) as unknown[];
    if (fencing.length !== fencingCounters || !fencing.every((v) => isInt(v, 1))) throw bad();
    return { status: 'granted', markerAge, fencing: fencing as number[] };
  }
  const holderTtl: unknown = reply[2];
  if (!isInt(holderTtl, 0)) throw bad();
  // A plain lock's refusal may add the holder's token (kinds/mutex.ts ACQUIRE_SCRIPT).
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
  throw malformed('extend', reply);
}

/** Decodes a release reply: the number of keys where a live membership was removed. */
export function decodeKindRelease(reply: unknown, keys: number): number {
  if (isInt(reply, 0) && reply <= keys) return reply;
  throw malformed('release', reply);
}

/** Decodes an inspect reply. */
export function decodeInspect(reply: unknown): InspectReply {
  const bad = (): Error => malformed('inspect', reply);
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
