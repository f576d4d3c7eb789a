import type { Cluster, Redis } from 'ioredis';
import { InvalidConfigurationError } from './errors';

/** A Redis master as the engine sees it: an ioredis `Redis` or `Cluster` instance. */
export type RedlockClient = Redis | Cluster;

/** Where the engine reports what it noticed. Defaults to `process.emitWarning` for warnings. */
export interface RedlockLogger {
  /** Something an operator should know about (a master down, an unsafe setting). */
  warn(message: string): void;
  /** Details useful when debugging (quarantine decisions, subscriber errors). */
  debug?(message: string): void;
}

/** Restart quarantine settings (REDLOCK.md, "Crash recovery"). */
export interface QuarantineSettings {
  /** Enforce the delayed-restart rule on the client. Default `true`. */
  enabled?: boolean;
  /**
   * How long (ms) a master that restarted without its data is kept from voting, counted from its
   * restart. Default: `maxTtl × (1 + driftFactor) + 2`, at least 1000 — long enough for every
   * lock it held to have expired (and for fencing counters, which restart from the server time in
   * whole seconds, to have moved past any token it handed out).
   */
  duration?: number;
  /**
   * Trust a master at once after a restart when it runs with `appendonly yes` and
   * `appendfsync always` (detected with `CONFIG GET`; masters where CONFIG is not allowed are
   * not trusted). Default `true`.
   */
  trustAppendFsyncAlways?: boolean;
}

/** Settings of the Redlock engine. Every field is optional; see {@link DEFAULT_SETTINGS}. */
export interface RedlockSettings {
  /** Default lock time-to-live in ms. Default 10 000. */
  ttl?: number;
  /**
   * Upper bound in ms for any ttl used with this engine (acquire and extend). Bounds how long a
   * forgotten lock can live, and so the restart quarantine. Default 60 000.
   */
  maxTtl?: number;
  /** Retries after the first attempt of `acquire`. Default 10. `tryAcquire` makes one attempt. */
  retryCount?: number;
  /** Base delay in ms between attempts. Default 200. */
  retryDelay?: number;
  /** Random ± spread in ms added to each retry delay, to desynchronize contenders. Default 100. */
  retryJitter?: number;
  /** Clock drift factor: drift = ttl × driftFactor + 2 ms. In [0, 1). Default 0.01. */
  driftFactor?: number;
  /** Per-node timeout in ms for every request to a master. Default 50. Must be below the ttl. */
  requestTimeout?: number;
  /** Votes needed. Default: a majority, floor(N/2) + 1. Lower values break mutual exclusion. */
  quorum?: number;
  /** Prefix of every key the engine writes. Default `'lock:'`. Must not contain `{` or `}`. */
  keyPrefix?: string;
  /** Maximum number of successful `extend` calls per lock. Default 1000. */
  maxExtensions?: number;
  /**
   * `using()` extends the lock when its remaining validity falls below this many ms.
   * Default: a third of the ttl.
   */
  extendThreshold?: number;
  /** Hand out a strictly increasing fencing token per resource with every lock. Default `true`. */
  fencing?: boolean;
  /**
   * TTL in ms of a fencing counter in Redis, set when the counter starts or is raised (not
   * refreshed by later locks). A counter that expires restarts from the master's clock in whole
   * seconds, past every token it handed out — provided it lived into a later clock second than
   * the one its tokens came from. Hence at least {@link MIN_FENCING_KEY_TTL} (2 s: one clock
   * second, plus up to 1 s of disagreement between the masters' clocks). Default 7 days.
   */
  fencingKeyTtl?: number;
  /** Restart quarantine; `false` disables it. Default enabled. */
  quarantine?: boolean | QuarantineSettings;
  /** Wake waiting acquires through Redis pub/sub as soon as a holder releases. Default `true`. */
  handoff?: boolean;
  /** Where warnings go. */
  logger?: RedlockLogger;
}

/** Settings after validation, with every default filled in. */
export interface ResolvedSettings {
  readonly ttl: number;
  readonly maxTtl: number;
  readonly retryCount: number;
  readonly retryDelay: number;
  readonly retryJitter: number;
  readonly driftFactor: number;
  readonly requestTimeout: number;
  readonly quorum: number;
  readonly keyPrefix: string;
  readonly maxExtensions: number;
  readonly extendThreshold: number | undefined;
  readonly fencing: boolean;
  readonly fencingKeyTtl: number;
  readonly quarantine: {
    readonly enabled: boolean;
    readonly duration: number;
    readonly trustAppendFsyncAlways: boolean;
  };
  readonly handoff: boolean;
  readonly logger: RedlockLogger;
}

/** Default values of {@link RedlockSettings}. */
export const DEFAULT_SETTINGS = Object.freeze({
  ttl: 10_000,
  maxTtl: 60_000,
  retryCount: 10,
  retryDelay: 200,
  retryJitter: 100,
  driftFactor: 0.01,
  requestTimeout: 50,
  keyPrefix: 'lock:',
  maxExtensions: 1000,
  fencing: true,
  fencingKeyTtl: 7 * 24 * 3600 * 1000,
  handoff: true,
});

/**
 * Smallest accepted `fencingKeyTtl`, in ms. Derived from the acquire script (scripts.ts): a
 * counter that is missing starts at `serverSeconds × 10^6 + 1` and its TTL is set when it starts
 * (or is raised to another master's value); later INCRs keep that TTL. Every token it hands out
 * is below `(S + 1) × 10^6` for a counter born (or raised to a value born) in clock second `S`,
 * as long as fewer than 10^6 locks per second are granted on the resource. When it expires it
 * restarts at `S' × 10^6 + 1`, which is larger than all of them exactly when `S' > S`: the
 * counter must outlive the rest of its clock second — 1000 ms on one clock. A raised value may
 * come from another master whose clock runs ahead; the extra 1000 ms covers clocks that disagree
 * by up to a second. With less, two successive holders could get the same token.
 */
export const MIN_FENCING_KEY_TTL = 2000;

/** Largest ttl Redis accepts for PX on every platform we care about (and setTimeout's limit). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

const defaultLogger: RedlockLogger = {
  warn: (message) => process.emitWarning(message, 'RedlockWarning'),
};

/** Drift allowance for a ttl (REDLOCK.md, step 4): ttl × driftFactor + 2 ms. */
export function driftFor(ttl: number, driftFactor: number): number {
  return Math.floor(ttl * driftFactor) + 2;
}

/** Checks that `value` is an integer in [min, max]; throws with the setting's name otherwise. */
export function checkInteger(
  field: string,
  value: unknown,
  min: number,
  max: number,
  make: (field: string, problem: string) => Error,
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
export function checkNonNegative(
  field: string,
  value: unknown,
  make: (field: string, problem: string) => Error,
): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw make(field, `must be a finite number, got ${describe(value)}`);
  }
  if (value < 0) throw make(field, `must not be negative, got ${value}`);
  return value;
}

/** Short, secret-free description of a value for error messages. */
export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'string') {
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

const configError = (field: string, problem: string): Error =>
  new InvalidConfigurationError(field, problem);

/**
 * Validates settings for `nodeCount` masters and fills in defaults. Throws
 * {@link InvalidConfigurationError} naming the first bad field.
 */
export function resolveSettings(settings: RedlockSettings, nodeCount: number): ResolvedSettings {
  if (settings === null || typeof settings !== 'object') {
    throw configError('settings', `must be an object, got ${describe(settings)}`);
  }
  const s = { ...DEFAULT_SETTINGS, ...stripUndefined(settings) };
  const maxTtl = checkInteger('maxTtl', s.maxTtl, 1, MAX_TIMER_MS, configError);
  const ttl = checkInteger('ttl', s.ttl, 1, maxTtl, configError);
  const retryCount = checkInteger('retryCount', s.retryCount, 0, 1_000_000, configError);
  const retryDelay = checkNonNegative('retryDelay', s.retryDelay, configError);
  const retryJitter = checkNonNegative('retryJitter', s.retryJitter, configError);
  if (typeof s.driftFactor !== 'number' || !(s.driftFactor >= 0 && s.driftFactor < 1)) {
    throw configError('driftFactor', `must be a number in [0, 1), got ${describe(s.driftFactor)}`);
  }
  const requestTimeout = checkInteger(
    'requestTimeout',
    s.requestTimeout,
    1,
    MAX_TIMER_MS,
    configError,
  );
  if (requestTimeout >= ttl) {
    throw configError('requestTimeout', `must be below the ttl (${ttl} ms), got ${requestTimeout}`);
  }
  const majority = Math.floor(nodeCount / 2) + 1;
  const quorum =
    s.quorum === undefined ? majority : checkInteger('quorum', s.quorum, 1, nodeCount, configError);
  if (typeof s.keyPrefix !== 'string' || /[{}]/.test(s.keyPrefix) || s.keyPrefix.length > 256) {
    throw configError('keyPrefix', 'must be a string of at most 256 characters without "{" or "}"');
  }
  const maxExtensions = checkInteger(
    'maxExtensions',
    s.maxExtensions,
    0,
    1_000_000_000,
    configError,
  );
  const extendThreshold =
    s.extendThreshold === undefined
      ? undefined
      : checkInteger('extendThreshold', s.extendThreshold, 1, maxTtl, configError);
  if (typeof s.fencing !== 'boolean') throw configError('fencing', 'must be a boolean');
  const fencingKeyTtl = checkInteger(
    'fencingKeyTtl',
    s.fencingKeyTtl,
    MIN_FENCING_KEY_TTL,
    2 ** 52,
    configError,
  );
  if (typeof s.handoff !== 'boolean') throw configError('handoff', 'must be a boolean');

  const q = s.quarantine === undefined || s.quarantine === true ? {} : s.quarantine;
  if (q !== false && (q === null || typeof q !== 'object')) {
    throw configError('quarantine', `must be a boolean or an object, got ${describe(q)}`);
  }
  const qEnabled = q === false ? false : (q.enabled ?? true);
  // At least 1 s: fencing counters restart from the server time in whole seconds, so a master
  // that lost its counters must not vote again within the second its old tokens came from.
  const defaultDuration = Math.max(1000, Math.ceil(maxTtl * (1 + s.driftFactor)) + 2);
  const duration =
    q === false || q.duration === undefined
      ? defaultDuration
      : checkInteger('quarantine.duration', q.duration, 0, 2 ** 52, configError);
  const logger = s.logger ?? defaultLogger;
  if (typeof logger.warn !== 'function') throw configError('logger', 'must have a warn() method');

  return {
    ttl,
    maxTtl,
    retryCount,
    retryDelay,
    retryJitter,
    driftFactor: s.driftFactor,
    requestTimeout,
    quorum,
    keyPrefix: s.keyPrefix,
    maxExtensions,
    extendThreshold,
    fencing: s.fencing,
    fencingKeyTtl,
    quarantine: {
      enabled: qEnabled,
      duration,
      trustAppendFsyncAlways: q === false ? false : (q.trustAppendFsyncAlways ?? true),
    },
    handoff: s.handoff,
    logger,
  };
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
