import { withFields } from './fields';
import { InvalidArgumentError, ShuttingDownError } from './errors';
import { MUTEX_SPEC, SHARED_SPEC } from './kind-spec';
import type { LockKindSpec } from './kind-spec';
import { MAX_TIMER_MS, checkInteger, describe } from './settings';
import type { ResolvedSettings } from './settings';
import type { AcquireOptions } from './types';
import {
  ACQUIRE_OPTION_NAMES,
  checkDelay,
  checkNames,
  checkObject,
  checkResourceName,
  checkRetryWait,
  checkTtl,
} from './validate';

/** Checks of the arguments of an acquire (typed errors naming the field, before any Redis call), and lock tokens. */

/** Longest accepted resource name, in characters. */
export const MAX_RESOURCE_LENGTH = 1024;
/** Most resources accepted in one lock. */
export const MAX_RESOURCES = 256;

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
  s: ResolvedSettings,
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

const argError = (field: string, problem: string): Error =>
  new InvalidArgumentError(field, problem);

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
  s: ResolvedSettings,
  draining: AbortSignal,
  names?: readonly string[],
): CheckedAcquire {
  const checked = checkAcquire(resources, options, s, names);
  if (draining.aborted) {
    throw new ShuttingDownError(withFields(NOTHING_TRIED, { resources: checked.resources }));
  }
  return checked;
}
