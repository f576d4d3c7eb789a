import { InvalidArgumentError, ShuttingDownError } from './errors';
import { withFields } from './fields';
import { RESOURCE_KEY_INFIXES } from './keys';
import { MAX_TIMER_MS, driftFor } from './clock';
import { MUTEX_SPEC, SHARED_SPEC } from './kind-spec';
import type { LockKindSpec } from './kind-spec';
import type { AcquireOptions } from './types';

/**
 * Boundary checks shared by the engine, its settings and the Nest layer: names, strings, ttls
 * and durations — every such check throws the error built by `make(field, problem)`, so the
 * same rule gives an `InvalidConfigurationError` for a setting and an `InvalidArgumentError`
 * for a call — and the arguments of an acquire, checked with their defaults filled in
 * ({@link checkAcquire}).
 */

/** Builds the typed error of a failed check. */
export type MakeError = (field: string, problem: string) => Error;

/** The {@link MakeError} of a call's arguments: an `InvalidArgumentError` naming the field. */
export const argError: MakeError = (field, problem) => new InvalidArgumentError(field, problem);

/**
 * Smallest validity budget (ms) a ttl must leave after its drift allowance, unless the request
 * timeout is smaller: ttl − drift(ttl) ≥ min(requestTimeout, MIN_VALIDITY_MS).
 */
export const MIN_VALIDITY_MS = 10;

/** Characters a `keyPrefix` may end with: the prefix must end one namespace level. */
export const KEY_PREFIX_SEPARATORS = [':', '/', '.', '-', '_', '|', '#'] as const;

/** Option names of `Redlock.acquire`. */
export const ACQUIRE_OPTION_NAMES = Object.freeze([
  'ttl',
  'retryCount',
  'retryDelay',
  'retryJitter',
  'waitTimeout',
  'signal',
  'shared',
  'limit',
] as const);
/** Option names of `Redlock.tryAcquire` (one attempt: no retry count, no deadline). */
export const TRY_ACQUIRE_OPTION_NAMES = Object.freeze([
  'ttl',
  'retryDelay',
  'retryJitter',
  'signal',
  'shared',
  'limit',
] as const);
/** Option names of `Redlock.using`. */
export const USING_OPTION_NAMES = Object.freeze([
  ...ACQUIRE_OPTION_NAMES,
  'autoExtend',
  'extendThreshold',
] as const);

/** Message of an unknown thrown value (what was thrown, for a log line or a cause). */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Short, secret-free description of a value for error messages. */
export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'string') {
    if (!isWellFormed(value)) return 'an ill-formed string';
    // Never echo what may be a URL or carry credentials (a client URL given where an instance
    // was expected, a password in the wrong field).
    if (/@|:\/\//.test(value)) return `a string of ${value.length} characters`;
    return value.length > 40 ? 'a long string' : JSON.stringify(value);
  }
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'undefined') {
    return String(value);
  }
  return Array.isArray(value) ? 'an array' : `a ${typeof value}`;
}

const LONE_SURROGATE = /\p{Cs}/u;

/**
 * Whether `s` is well-formed UTF-16 (no lone surrogate). Ill-formed strings are not encodable:
 * `'\uD800'`, `'\uDC00'` and `'\uFFFD'` all become the bytes EF BF BD on the way to Redis.
 */
export function isWellFormed(s: string): boolean {
  const native = (s as { isWellFormed?: () => boolean }).isWellFormed;
  return typeof native === 'function' ? native.call(s) : !LONE_SURROGATE.test(s);
}

/** Checks that `value` is a plain options object (not null, not an array). */
export function checkObject(field: string, value: unknown, make: MakeError): object {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw make(field, `must be an object, got ${describe(value)}`);
  }
  return value;
}

/**
 * Rejects any own key of `value` that is not in `names` (typos such as `retryDely` must not be
 * ignored silently). The error lists the valid names. `prefix` qualifies the field (`quarantine.`).
 */
export function checkNames(
  value: object,
  names: readonly string[],
  make: MakeError,
  prefix = '',
  what = 'setting',
): void {
  for (const key of Object.keys(value)) {
    if (!names.includes(key)) {
      throw make(
        `${prefix}${key}`,
        `unknown ${what}; valid names are ${names.map((n) => prefix + n).join(', ')}`,
      );
    }
  }
}

/** Checks that `value` is an integer in [min, max]. */
export function checkInteger(
  field: string,
  value: unknown,
  min: number,
  max: number,
  make: MakeError,
): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw make(field, `must be a finite number, got ${describe(value)}`);
  }
  if (!Number.isInteger(value)) throw make(field, `must be an integer, got ${value}`);
  if (value < min || value > max)
    throw make(field, `must be between ${min} and ${max}, got ${value}`);
  return value;
}

/** Checks that `value` is a finite number ≥ 0. */
export function checkNonNegative(field: string, value: unknown, make: MakeError): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw make(field, `must be a finite number, got ${describe(value)}`);
  }
  if (value < 0) throw make(field, `must not be negative, got ${value}`);
  return value;
}

/** A delay in ms that a Node timer can wait: a finite number in [0, 2^31 − 1]. */
export function checkDelay(field: string, value: unknown, make: MakeError): number {
  const ms = checkNonNegative(field, value, make);
  if (ms > MAX_TIMER_MS) {
    throw make(
      field,
      `must be at most ${MAX_TIMER_MS} ms (2^31 − 1, Node's timer limit), got ${ms}`,
    );
  }
  return ms;
}

/** The longest retry wait is `retryDelay + retryJitter`: it must fit a Node timer too. */
export function checkRetryWait(
  retryDelay: number,
  retryJitter: number,
  make: MakeError,
  prefix = '',
): void {
  if (retryDelay + retryJitter > MAX_TIMER_MS) {
    throw make(
      `${prefix}retryJitter`,
      `retryDelay + retryJitter must be at most ${MAX_TIMER_MS} ms (Node's timer limit), got ${retryDelay} + ${retryJitter}`,
    );
  }
}

/** Checks that `value` is a boolean. */
export function checkBoolean(field: string, value: unknown, make: MakeError): boolean {
  if (typeof value !== 'boolean') throw make(field, `must be a boolean, got ${describe(value)}`);
  return value;
}

/**
 * Smallest ttl that can ever be granted: the validity left after the drift allowance,
 * ttl − (ttl × driftFactor + 2), must be at least min(requestTimeout, {@link MIN_VALIDITY_MS}) —
 * time for the masters to answer. A smaller ttl would end every attempt with no validity left.
 */
export function minTtl(requestTimeout: number, driftFactor: number): number {
  const budget = Math.min(requestTimeout, MIN_VALIDITY_MS);
  const ok = (ttl: number): boolean => ttl - driftFor(ttl, driftFactor) >= budget;
  // ttl − drift(ttl) never decreases as ttl grows: binary search the first ttl that fits.
  let lo = budget + 2;
  let hi = Math.ceil((budget + 2) / (1 - driftFactor)) + 1;
  while (!ok(hi)) hi *= 2;
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2);
    if (ok(mid)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** What the ttl checks need to know of the settings. */
export interface TtlLimits {
  readonly maxTtl: number;
  readonly requestTimeout: number;
  readonly driftFactor: number;
}

/** Checks a lock ttl: an integer in [{@link minTtl}, maxTtl]. */
export function checkTtl(field: string, value: unknown, s: TtlLimits, make: MakeError): number {
  const ttl = checkInteger(field, value, 1, s.maxTtl, make);
  const min = minTtl(s.requestTimeout, s.driftFactor);
  if (ttl < min) {
    throw make(
      field,
      `must be at least ${min} ms: ttl − drift (ttl × driftFactor + 2) must leave min(requestTimeout, ${MIN_VALIDITY_MS}) ms for the masters to answer, got ${ttl}`,
    );
  }
  return ttl;
}

/**
 * Checks an `extendThreshold` against the ttl it applies to: at most half of it, so that an
 * extension never follows the previous one at once (a threshold near the ttl would extend back
 * to back until `maxExtensions` drops the lock).
 */
export function checkExtendThreshold(
  field: string,
  value: unknown,
  ttl: number,
  make: MakeError,
): number {
  const threshold = checkInteger(field, value, 1, MAX_TIMER_MS, make);
  if (threshold > Math.floor(ttl / 2)) {
    throw make(
      field,
      `must be at most half the ttl (${Math.floor(ttl / 2)} ms for a ttl of ${ttl} ms), got ${threshold}`,
    );
  }
  return threshold;
}

/**
 * The threshold in force for a lock of `ttl` ms: the requested one (or a third of the ttl),
 * capped at half the ttl — the lock's ttl may be shorter than the one the setting was checked
 * against (a per-call ttl, an extension to a shorter ttl).
 */
export function effectiveThreshold(ttl: number, requested: number | undefined): number {
  const half = Math.max(1, Math.floor(ttl / 2));
  return Math.min(requested ?? Math.max(1, Math.floor(ttl / 3)), half);
}

/**
 * Checks one resource name: a non-empty, well-formed string of at most `maxLength` characters.
 */
export function checkResourceName(
  field: string,
  value: unknown,
  maxLength: number,
  make: MakeError,
): string {
  if (typeof value !== 'string') throw make(field, `must be a string, got ${describe(value)}`);
  if (value.length === 0) throw make(field, 'must not be empty');
  if (value.length > maxLength)
    throw make(field, `must be at most ${maxLength} characters, got ${value.length}`);
  if (!isWellFormed(value)) {
    throw make(
      field,
      'must be a well-formed string (it contains a lone UTF-16 surrogate, which cannot be encoded unambiguously)',
    );
  }
  return value;
}

/**
 * Checks the key prefix: every key the engine writes (locks, fencing counters, the boot marker,
 * hand-off channels) starts with it, so it must be a namespace of its own: non-empty, at most
 * 256 characters, well-formed, without `{` or `}` (hash tags), ending with a separator, and not
 * a key namespace of another accepted prefix: `P + infix` for an infix of base/keys.ts
 * `RESOURCE_KEY_INFIXES` (e.g. `"lock:fence:"` or `"app:wait:"`, where `"lock:"` and `"app:"`
 * are accepted) is refused, since its lock keys would be exactly `P`'s fencing counters,
 * writer-waiting flags or fair-mode keys (see base/keys.ts for why no other pair of accepted prefixes
 * can share a key).
 */
export function checkKeyPrefix(field: string, value: unknown, make: MakeError): string {
  const rule = `must be a non-empty string of at most 256 characters without "{" or "}", ending with one of ${KEY_PREFIX_SEPARATORS.join(' ')} (e.g. "lock:")`;
  if (typeof value !== 'string' || value.length === 0 || value.length > 256) {
    throw make(field, `${rule}, got ${describe(value)}`);
  }
  if (/[{}]/.test(value)) throw make(field, `${rule}, got ${describe(value)}`);
  if (!isWellFormed(value)) throw make(field, `${rule}; it contains a lone UTF-16 surrogate`);
  if (!isSeparator(value[value.length - 1])) {
    throw make(field, `${rule}, got ${describe(value)}`);
  }
  for (const infix of RESOURCE_KEY_INFIXES) {
    const outer = value.slice(0, -infix.length);
    if (value.endsWith(infix) && outer.length > 0 && isSeparator(outer[outer.length - 1])) {
      const instead = `${outer}${infix.slice(0, -1)}-locks:`;
      throw make(
        field,
        `must not end with "${infix}" after a separator: its lock keys would be the "${infix}" keys of the prefix ${describe(outer)} (choose e.g. ${describe(instead)}), got ${describe(value)}`,
      );
    }
  }
  return value;
}

function isSeparator(c: string): boolean {
  return (KEY_PREFIX_SEPARATORS as readonly string[]).includes(c);
}

// The arguments of an acquire: checked (typed errors naming the field, before any Redis call),
// with the defaults filled in from the engine's settings.

/** Longest accepted resource name, in characters. */
export const MAX_RESOURCE_LENGTH = 1024;
/** Most resources accepted in one lock. */
export const MAX_RESOURCES = 256;

/**
 * What an acquire's defaults and checks need to know of the engine settings
 * (`ResolvedSettings`, base/settings.ts).
 */
export interface AcquireDefaults extends TtlLimits {
  readonly ttl: number;
  readonly retryCount: number;
  readonly retryDelay: number;
  readonly retryJitter: number;
}

/** Acquire options checked against the engine settings, with defaults filled in. */
export interface CheckedAcquire {
  readonly resources: string[];
  readonly ttl: number;
  readonly retryCount: number;
  readonly retryDelay: number;
  readonly retryJitter: number;
  readonly waitTimeout: number | undefined;
  readonly signal: AbortSignal | undefined;
  /** The kind of lock requested (`shared`, `limit`; a plain lock by default). */
  readonly kind: LockKindSpec;
  /**
   * How long (ms) a plain lock refused by shared readers keeps their writer-waiting flag up: a
   * retry interval (retryDelay + retryJitter + two request timeouts), so that a retrying writer's
   * flag does not lapse between attempts; 0 when the request does not retry.
   */
  readonly writerWait: number;
}

/** Largest semaphore `limit` accepted. */
export const MAX_LIMIT = 1_000_000;

/** The kind of lock of `shared` / `limit` options (typed errors naming the field). */
export function checkKind(shared: unknown, limit: unknown, prefix = ''): LockKindSpec {
  if (shared !== undefined && typeof shared !== 'boolean') {
    throw new InvalidArgumentError(`${prefix}shared`, `must be a boolean, got ${describe(shared)}`);
  }
  if (limit === undefined) return shared ? SHARED_SPEC : MUTEX_SPEC;
  const n = checkInteger(`${prefix}limit`, limit, 1, MAX_LIMIT, argError);
  if (shared) {
    throw new InvalidArgumentError(
      `${prefix}limit`,
      'a lock is either shared or a semaphore with a limit, not both',
    );
  }
  return { name: 'semaphore', limit: n };
}

/**
 * Validates `acquire` arguments (typed errors naming the field, before any Redis call) and fills
 * in the defaults from `s`. Shared by every engine implementation.
 */
export function checkAcquire(
  resources: unknown,
  options: AcquireOptions,
  s: AcquireDefaults,
  names: readonly string[] = ACQUIRE_OPTION_NAMES,
): CheckedAcquire {
  const list = normalizeResources(resources);
  checkObject('options', options, argError);
  checkNames(options, names, argError, '', 'option');
  if (options.signal !== undefined && !(options.signal instanceof AbortSignal)) {
    throw new InvalidArgumentError('signal', 'must be an AbortSignal');
  }
  // Each option: the setting when absent, else checked (no closure per call: 10,000 waiters
  // queued in one tick).
  const o = options;
  const retryDelay =
    o.retryDelay === undefined ? s.retryDelay : checkDelay('retryDelay', o.retryDelay, argError);
  const retryJitter =
    o.retryJitter === undefined
      ? s.retryJitter
      : checkDelay('retryJitter', o.retryJitter, argError);
  checkRetryWait(retryDelay, retryJitter, argError);
  const kind = checkKind(o.shared, o.limit);
  const retryCount =
    o.retryCount === undefined
      ? s.retryCount
      : checkInteger('retryCount', o.retryCount, 0, 1_000_000, argError);
  return {
    resources: list,
    ttl: o.ttl === undefined ? s.ttl : checkTtl('ttl', o.ttl, s, argError),
    retryCount,
    retryDelay,
    retryJitter,
    waitTimeout:
      o.waitTimeout === undefined
        ? undefined
        : checkInteger('waitTimeout', o.waitTimeout, 0, MAX_TIMER_MS, argError),
    signal: options.signal,
    kind,
    writerWait:
      retryCount > 0 && kind.name === 'mutex'
        ? Math.min(MAX_TIMER_MS, retryDelay + retryJitter + 2 * s.requestTimeout)
        : 0,
  };
}

/** Validates resource names and returns them de-duplicated and sorted. */
export function normalizeResources(resources: unknown): string[] {
  // One name: no set, no sort (the common case, and 10,000 waiters queued in one tick).
  if (typeof resources === 'string') {
    return [checkResourceName('resources', resources, MAX_RESOURCE_LENGTH, argError)];
  }
  const list = resources;
  if (!Array.isArray(list)) {
    throw new InvalidArgumentError(
      'resources',
      `must be a string or an array of strings, got ${describe(resources)}`,
    );
  }
  if (list.length === 0) throw new InvalidArgumentError('resources', 'must not be empty');
  if (list.length > MAX_RESOURCES)
    throw new InvalidArgumentError(
      'resources',
      `at most ${MAX_RESOURCES} resources per lock, got ${list.length}`,
    );
  // An indexed loop, not forEach: holes of a sparse array (`[, 'a']`, `new Array(2)`) are checked.
  const names: string[] = [];
  for (let i = 0; i < list.length; i++) {
    const field = `resources[${i}]`;
    names.push(checkResourceName(field, (list as unknown[])[i], MAX_RESOURCE_LENGTH, argError));
  }
  return [...new Set(names)].sort();
}

/** The detail of an acquisition refused before any attempt. */
const NOTHING_TRIED = { votes: [], attempts: 0, elapsed: 0 } as const;

/**
 * {@link checkAcquire}, then {@link ShuttingDownError} (nothing tried) once the engine began to
 * drain (`draining` aborted): no new acquire starts after `close()`.
 */
export function checkOpenAcquire(
  resources: unknown,
  options: AcquireOptions,
  s: AcquireDefaults,
  draining: AbortSignal,
  names?: readonly string[],
): CheckedAcquire {
  const checked = checkAcquire(resources, options, s, names);
  if (draining.aborted) {
    throw new ShuttingDownError(withFields(NOTHING_TRIED, { resources: checked.resources }));
  }
  return checked;
}
