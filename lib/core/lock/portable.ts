import { InvalidLockDataError } from '../base/errors';
import type { LockKindName } from '../base/kind-spec';
import type { ResolvedSettings } from '../base/settings';
import {
  MAX_LIMIT,
  MAX_RESOURCES,
  MAX_RESOURCE_LENGTH,
  checkInteger,
  checkNames,
  checkResourceName,
  checkTtl,
  describe,
} from '../base/validate';

/**
 * Portable locks: the plain form of a lock (`lock.toJSON()`, used by
 * `JSON.stringify(lock)`) and its checks before `restore(data)` turns it back into a `Lock` of
 * another engine over the same masters and key prefix (policy/restore.ts).
 */

/** Version of {@link SerializedLock} written by this release (and the only one it reads). */
export const SERIALIZED_LOCK_VERSION = 1;

/**
 * A lock as plain data: what `lock.toJSON()` returns and `restore(data)` accepts. Treat it as a
 * bearer credential: whoever has it can extend and release the lock.
 */
export interface SerializedLock {
  /** Format version ({@link SERIALIZED_LOCK_VERSION}). */
  readonly version: 1;
  /** Kind of lock: `'mutex'` (plain), `'shared'` or `'semaphore'` (with {@link limit}). */
  readonly kind: LockKindName;
  /** A semaphore's limit (only for `kind: 'semaphore'`). */
  readonly limit?: number;
  /** The engine's key prefix: the restoring engine must use the same one. */
  readonly keyPrefix: string;
  /** Locked resources, de-duplicated and sorted. */
  readonly resources: readonly string[];
  /** The lock's token (base64url: the engine id, then 160 random bits). */
  readonly token: string;
  /** TTL in ms of the last acquire or extension. */
  readonly ttl: number;
  /** Wall-clock ms when the winning acquire request was sent. */
  readonly acquiredAt: number;
  /**
   * Wall-clock ms at which the keys expire if nobody extends (the ttl counted from when the last
   * acquire or extension was sent). The restoring engine's validity ends `drift` earlier.
   */
  readonly expiresAt: number;
  /** Fencing token per resource (empty when fencing is off). */
  readonly fencingTokens: Readonly<Record<string, number>>;
  /** The lock's `lockAtLeastFor` (ms after `acquiredAt`), when it has one. */
  readonly lockAtLeastFor?: number;
}

const FIELDS: readonly string[] = Object.freeze([
  'version',
  'kind',
  'limit',
  'keyPrefix',
  'resources',
  'token',
  'ttl',
  'acquiredAt',
  'expiresAt',
  'fencingTokens',
  'lockAtLeastFor',
]);

/**
 * The engine's tokens (base/token.ts): the engine id (12 characters) and 20 random bytes, base64url
 * (27 characters, no padding); a token without the id is accepted too.
 */
const TOKEN = /^(?:[A-Za-z0-9_-]{12})?[A-Za-z0-9_-]{27}$/;

const fail = (field: string, problem: string): Error =>
  new InvalidLockDataError(`data${field === '' ? '' : `.${field}`}`, problem);

/**
 * Checks that `data` is a lock serialized by {@link SerializedLock}'s rules for an engine with
 * the settings `s` (same key prefix; ttl and `lockAtLeastFor` within its limits). Throws
 * {@link InvalidLockDataError} naming the first bad field.
 */
export function checkSerializedLock(data: unknown, s: ResolvedSettings): SerializedLock {
  if (data === null || typeof data !== 'object' || Array.isArray(data)) {
    throw fail('', `must be a serialized lock (lock.toJSON()), got ${describe(data)}`);
  }
  const proto = Object.getPrototypeOf(data) as unknown;
  if (proto !== Object.prototype && proto !== null) {
    const name = (data as { constructor?: { name?: unknown } }).constructor?.name;
    throw fail(
      '',
      `must be plain data (lock.toJSON(), or JSON.parse of JSON.stringify(lock)), got an instance of ${typeof name === 'string' && name ? name : 'a class'}`,
    );
  }
  checkNames(data, FIELDS, fail, '', 'field');
  const d = data as Record<string, unknown>;
  if (d.version !== SERIALIZED_LOCK_VERSION) {
    throw fail(
      'version',
      `unknown version ${describe(d.version)}; this engine reads version ${SERIALIZED_LOCK_VERSION}`,
    );
  }
  if (d.kind !== 'mutex' && d.kind !== 'shared' && d.kind !== 'semaphore') {
    throw fail('kind', `unknown kind of lock ${describe(d.kind)}`);
  }
  const kind: LockKindName = d.kind;
  const limit =
    kind === 'semaphore' ? checkInteger('limit', d.limit, 1, MAX_LIMIT, fail) : undefined;
  if (kind !== 'semaphore' && d.limit !== undefined) {
    throw fail(
      'limit',
      `only a semaphore has a limit, got ${describe(d.limit)} for a ${kind} lock`,
    );
  }
  if (d.keyPrefix !== s.keyPrefix) {
    throw fail(
      'keyPrefix',
      `the lock was taken under the key prefix ${describe(d.keyPrefix)}; this engine uses ${describe(s.keyPrefix)}`,
    );
  }
  const resources = checkResources(d.resources);
  if (typeof d.token !== 'string' || !TOKEN.test(d.token)) {
    throw fail('token', `must be a lock token (27 base64url characters), got ${describe(d.token)}`);
  }
  const ttl = checkTtl('ttl', d.ttl, s, fail);
  const acquiredAt = checkInteger('acquiredAt', d.acquiredAt, 0, Number.MAX_SAFE_INTEGER, fail);
  const expiresAt = checkInteger('expiresAt', d.expiresAt, 0, Number.MAX_SAFE_INTEGER, fail);
  if (expiresAt < acquiredAt) {
    throw fail('expiresAt', `must not be before acquiredAt (${acquiredAt}), got ${expiresAt}`);
  }
  const fencingTokens = checkFencing(d.fencingTokens, resources);
  const lockAtLeastFor =
    d.lockAtLeastFor === undefined
      ? undefined
      : checkInteger('lockAtLeastFor', d.lockAtLeastFor, 0, s.maxTtl, fail);
  return {
    version: SERIALIZED_LOCK_VERSION,
    kind,
    ...(limit === undefined ? {} : { limit }),
    keyPrefix: s.keyPrefix,
    resources,
    token: d.token,
    ttl,
    acquiredAt,
    expiresAt,
    fencingTokens,
    ...(lockAtLeastFor === undefined ? {} : { lockAtLeastFor }),
  };
}

/** A lock's resources: valid names, de-duplicated and sorted (as every lock has them). */
function checkResources(value: unknown): string[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_RESOURCES) {
    throw fail(
      'resources',
      `must be a non-empty array of at most ${MAX_RESOURCES} resource names, got ${describe(value)}`,
    );
  }
  const list: string[] = [];
  for (let i = 0; i < value.length; i++) {
    list.push(
      checkResourceName(`resources[${i}]`, (value as unknown[])[i], MAX_RESOURCE_LENGTH, fail),
    );
  }
  const normalized = [...new Set(list)].sort();
  if (normalized.length !== list.length || normalized.some((r, i) => r !== list[i])) {
    throw fail('resources', "must be de-duplicated and sorted, as a lock's resources are");
  }
  return list;
}

/** Fencing tokens: none, or a safe positive integer for every resource (nothing else). */
function checkFencing(value: unknown, resources: readonly string[]): Record<string, number> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw fail('fencingTokens', `must be an object, got ${describe(value)}`);
  }
  const table = Object.create(null) as Record<string, number>; // '__proto__' is a resource too
  const keys = Object.keys(value);
  for (const key of keys) {
    if (!resources.includes(key)) {
      throw fail(
        'fencingTokens',
        `has a token for ${describe(key)}, which is not a locked resource`,
      );
    }
    const token = Object.getOwnPropertyDescriptor(value, key)?.value as unknown;
    table[key] = checkInteger(
      `fencingTokens[${JSON.stringify(key)}]`,
      token,
      1,
      Number.MAX_SAFE_INTEGER,
      fail,
    );
  }
  if (keys.length !== 0 && keys.length !== resources.length) {
    throw fail('fencingTokens', 'must have a token for every resource, or none (fencing off)');
  }
  return table;
}
