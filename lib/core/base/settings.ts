import { MAX_TIMER_MS } from './clock';
import { InvalidConfigurationError } from './errors';
import {
  checkBoolean,
  checkDelay,
  checkExtendThreshold,
  checkInteger,
  checkKeyPrefix,
  checkNames,
  checkObject,
  checkRetryWait,
  checkTtl,
  describe,
} from './validate';

export type { RedlockClient } from './client-types';

/** Where the engine reports what it noticed. Defaults to `process.emitWarning` for warnings. */
export interface RedlockLogger {
  /** Something an operator should know about (a master down, an unsafe setting). */
  warn(message: string): void;
  /** Details useful when debugging (quarantine decisions, subscriber errors). */
  debug?(message: string): void;
}

/** Restart quarantine settings (docs/REDLOCK.md, "Crash recovery"). */
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
  /**
   * Default lock time-to-live in ms. Default 10 000. Every ttl (this one, per-call, extensions)
   * must leave time for the masters to answer after the drift allowance:
   * ttl − (ttl × driftFactor + 2) ≥ min(requestTimeout, 10).
   */
  ttl?: number;
  /**
   * Upper bound in ms for any ttl used with this engine (acquire and extend). Bounds how long a
   * forgotten lock can live, and so the restart quarantine. Default 60 000.
   */
  maxTtl?: number;
  /** Retries after the first attempt of `acquire`. Default 10. `tryAcquire` makes one attempt. */
  retryCount?: number;
  /** Base delay in ms between attempts. Default 200. `retryDelay + retryJitter` ≤ 2^31 − 1. */
  retryDelay?: number;
  /** Random ± spread in ms added to each retry delay, to desynchronize contenders. Default 100. */
  retryJitter?: number;
  /** Clock drift factor: drift = ttl × driftFactor + 2 ms. In [0, 1). Default 0.01. */
  driftFactor?: number;
  /** Per-node timeout in ms for every request to a master. Default 50. Must be below the ttl. */
  requestTimeout?: number;
  /** Votes needed. Default: a majority, floor(N/2) + 1. Lower values break mutual exclusion. */
  quorum?: number;
  /**
   * Prefix of every key (and hand-off channel) the engine writes. Default `'lock:'`. Non-empty,
   * well-formed, without `{` or `}`, ending with a separator (`:` `/` `.` `-` `_` `|` `#`).
   */
  keyPrefix?: string;
  /** Maximum number of successful `extend` calls per lock. Default 1000. */
  maxExtensions?: number;
  /**
   * `using()` (and `@Locked()`) extends the lock when its remaining validity falls below this
   * many ms. Default: a third of the ttl. At most half the `ttl` setting; for a lock with a
   * shorter ttl it is capped at half that lock's ttl.
   */
  extendThreshold?: number;
  /** Hand out a strictly increasing fencing token per resource with every lock. Default `true`. */
  fencing?: boolean;
  /**
   * TTL in ms of a fencing counter in Redis, set when the counter starts or is raised (not
   * refreshed by later locks). A counter that expires restarts from the master's clock in whole
   * seconds, past every token it handed out — provided it lived into a later clock second than
   * the one its tokens came from. Hence at least {@link MIN_FENCING_KEY_TTL} (2 s: one clock
   * second, plus up to 1 s of disagreement between the masters' clocks). Default 1 hour.
   *
   * Footprint: one counter per Redis Cluster hash slot that a lock key fell in within the last
   * `fencingKeyTtl`, shared by the resources of that slot (base/keys.ts): at most 16,384 keys of about
   * 80 bytes (about 1.3 MB) on each master, however many resources are locked. Tokens stay
   * strictly increasing across a counter's expiry as long as no master's clock steps back by more
   * than `fencingKeyTtl` (minus one second per million locks the counter handed out): a longer
   * TTL tolerates larger clock steps, a shorter one reads the clock more often.
   */
  fencingKeyTtl?: number;
  /** Restart quarantine; `false` disables it. Default enabled. */
  quarantine?: boolean | QuarantineSettings;
  /**
   * Wake waiting acquires through Redis pub/sub as soon as a holder releases (standalone and
   * Cluster masters). Default `true`. With `false` waiters poll every `retryDelay ± retryJitter`;
   * with `fairness: 'across-processes'` a process busy with a resource still lets the other
   * processes' pollers in after 8 local hand-overs: their refused attempts leave poll marks that
   * its hand-overs read, and its own waiters then take no free key while such a mark is up, until
   * a poller took the resource.
   */
  handoff?: boolean;
  /**
   * How the waiters of a contended resource are served. `'local'` (default): in the order they
   * began to wait within this process (a FIFO per resource, one attempt at a time per resource),
   * woken by a local release or a release announcement; between processes the masters decide,
   * as in the Redlock algorithm. `'across-processes'`: also in the order they began to wait
   * across processes — a releasing holder hands the lock to the process that waited longest
   * (lib/core/fair/README.md). It costs every contended lock more script work on the
   * masters; choose it when no process may starve behind a busy one.
   */
  fairness?: Fairness;
  /**
   * Self-healing extension: an extension puts the lock's key back (`SET NX`, same token, the new
   * ttl) on masters that lost it — typically a master that restarted empty — so that a long-held
   * lock does not decay to a bare majority and die at the next single failure. Repaired masters
   * never count toward the extension that repairs them, nor while in restart quarantine; a key
   * held by anyone else is never overwritten; fencing tokens are unchanged. `false`: extensions
   * only refresh keys that are still there. Default `true`. (No effect on the in-memory engine.)
   */
  repairOnExtend?: boolean;
  /**
   * Check the masters' clocks while running (docs/guarantees.md, "Clock jumps"): every acquire
   * and extension reads each standalone master's clock (`TIME`) in the same round trip as its
   * vote. A master whose clock moved against this engine's monotonic clock by more than the
   * drift allowance (driftFactor × the time since its last reading + 2 ms), or is off the other
   * masters' by more than `clockTolerance`, is treated like a master that restarted empty: its
   * votes do not count for `quarantine.duration` (and while it stays off), and locks the engine
   * holds that needed its vote are re-checked at once. Default `true`.
   */
  clockCheck?: boolean;
  /**
   * How far (ms) a master's clock may be off the other masters' before its votes stop counting
   * (see {@link clockCheck}). Masters whose clocks are kept in step by NTP agree within a few
   * ms. Default 1000.
   */
  clockTolerance?: number;
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
  readonly fairness: Fairness;
  readonly repairOnExtend: boolean;
  readonly clockCheck: boolean;
  readonly clockTolerance: number;
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
  fencingKeyTtl: 3600 * 1000,
  handoff: true,
  fairness: 'local',
  repairOnExtend: true,
  clockCheck: true,
  clockTolerance: 1000,
});

/** The values of the `fairness` setting (see {@link RedlockSettings.fairness}). */
export type Fairness = 'local' | 'across-processes';

/** Every value the `fairness` setting accepts. */
export const FAIRNESS_VALUES: readonly Fairness[] = Object.freeze(['local', 'across-processes']);

/**
 * Smallest accepted `fencingKeyTtl`, in ms. Derived from the acquire script (redis/scripts/fencing.ts):
 * a counter that is missing starts at `serverSeconds × 10^6 + 1` and its TTL is set when it starts
 * (or is raised to another master's value); later INCRs keep that TTL. Every token it hands out
 * is below `(S + 1) × 10^6` for a counter born (or raised to a value born) in clock second `S`,
 * as long as fewer than 10^6 locks per second are granted on the resources of its Cluster slot
 * (the counter is shared by them, base/keys.ts). When it expires it restarts at `S' × 10^6 + 1`,
 * which is larger than all of them exactly when `S' > S`: the counter must outlive the rest of
 * its clock second — 1000 ms on one clock. A raised value may come from another master whose
 * clock runs ahead; the extra 1000 ms covers clocks that disagree by up to a second. With less, two successive holders could get the same token.
 */
export const MIN_FENCING_KEY_TTL = 2000;

/** Every name {@link RedlockSettings} accepts. */
export const SETTING_NAMES: readonly (keyof RedlockSettings)[] = Object.freeze([
  'ttl',
  'maxTtl',
  'retryCount',
  'retryDelay',
  'retryJitter',
  'driftFactor',
  'requestTimeout',
  'quorum',
  'keyPrefix',
  'maxExtensions',
  'extendThreshold',
  'fencing',
  'fencingKeyTtl',
  'quarantine',
  'handoff',
  'fairness',
  'repairOnExtend',
  'clockCheck',
  'clockTolerance',
  'logger',
]);

/** Every name {@link QuarantineSettings} accepts. */
export const QUARANTINE_NAMES: readonly (keyof QuarantineSettings)[] = Object.freeze([
  'enabled',
  'duration',
  'trustAppendFsyncAlways',
]);

const defaultLogger: RedlockLogger = {
  warn: (message) => process.emitWarning(message, 'RedlockWarning'),
};

const configError = (field: string, problem: string): Error =>
  new InvalidConfigurationError(field, problem);

/**
 * Validates settings for `nodeCount` masters and fills in defaults. Throws
 * {@link InvalidConfigurationError} naming the first bad field; an unknown name is an error
 * that lists the valid ones.
 */
export function resolveSettings(settings: RedlockSettings, nodeCount: number): ResolvedSettings {
  checkObject('settings', settings, configError);
  checkNames(settings, SETTING_NAMES, configError);
  // (Once per engine, not on the lock's path: the spread stays.)
  // eslint-disable-next-line no-restricted-syntax
  const s = { ...DEFAULT_SETTINGS, ...stripUndefined(settings) };
  const maxTtl = checkInteger('maxTtl', s.maxTtl, 1, MAX_TIMER_MS, configError);
  const retryCount = checkInteger('retryCount', s.retryCount, 0, 1_000_000, configError);
  const retryDelay = checkDelay('retryDelay', s.retryDelay, configError);
  const retryJitter = checkDelay('retryJitter', s.retryJitter, configError);
  checkRetryWait(retryDelay, retryJitter, configError);
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
  const limits = { maxTtl, requestTimeout, driftFactor: s.driftFactor };
  const ttl = checkTtl('ttl', s.ttl, limits, configError);
  if (requestTimeout >= ttl) {
    throw configError('requestTimeout', `must be below the ttl (${ttl} ms), got ${requestTimeout}`);
  }
  const majority = Math.floor(nodeCount / 2) + 1;
  const quorum =
    s.quorum === undefined ? majority : checkInteger('quorum', s.quorum, 1, nodeCount, configError);
  const keyPrefix = checkKeyPrefix('keyPrefix', s.keyPrefix, configError);
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
      : checkExtendThreshold('extendThreshold', s.extendThreshold, ttl, configError);
  const fencing = checkBoolean('fencing', s.fencing, configError);
  const fencingKeyTtl = checkInteger(
    'fencingKeyTtl',
    s.fencingKeyTtl,
    MIN_FENCING_KEY_TTL,
    2 ** 52,
    configError,
  );
  const handoff = checkBoolean('handoff', s.handoff, configError);
  const repairOnExtend = checkBoolean('repairOnExtend', s.repairOnExtend, configError);
  const clockCheck = checkBoolean('clockCheck', s.clockCheck, configError);
  const clockTolerance = checkInteger(
    'clockTolerance',
    s.clockTolerance,
    0,
    MAX_TIMER_MS,
    configError,
  );
  if (!(FAIRNESS_VALUES as readonly unknown[]).includes(s.fairness)) {
    throw configError(
      'fairness',
      `must be ${FAIRNESS_VALUES.map((v) => `'${v}'`).join(' or ')}, got ${describe(s.fairness)}`,
    );
  }
  const fairness = s.fairness as Fairness;

  const q = s.quarantine === undefined || s.quarantine === true ? {} : s.quarantine;
  if (q !== false) {
    if (q === null || typeof q !== 'object' || Array.isArray(q)) {
      throw configError('quarantine', `must be a boolean or an object, got ${describe(q)}`);
    }
    checkNames(q, QUARANTINE_NAMES, configError, 'quarantine.');
  }
  const qEnabled =
    q === false || q.enabled === undefined
      ? q !== false
      : checkBoolean('quarantine.enabled', q.enabled, configError);
  // At least 1 s: fencing counters restart from the server time in whole seconds, so a master
  // that lost its counters must not vote again within the second its old tokens came from.
  const defaultDuration = Math.max(1000, Math.ceil(maxTtl * (1 + s.driftFactor)) + 2);
  const duration =
    q === false || q.duration === undefined
      ? defaultDuration
      : checkInteger('quarantine.duration', q.duration, 0, 2 ** 52, configError);
  const trustAppendFsyncAlways =
    q === false || q.trustAppendFsyncAlways === undefined
      ? q !== false
      : checkBoolean('quarantine.trustAppendFsyncAlways', q.trustAppendFsyncAlways, configError);
  const logger = checkLogger(s.logger ?? defaultLogger);

  return {
    ttl,
    maxTtl,
    retryCount,
    retryDelay,
    retryJitter,
    driftFactor: s.driftFactor,
    requestTimeout,
    quorum,
    keyPrefix,
    maxExtensions,
    extendThreshold,
    fencing,
    fencingKeyTtl,
    quarantine: { enabled: qEnabled, duration, trustAppendFsyncAlways },
    handoff,
    fairness,
    repairOnExtend,
    clockCheck,
    clockTolerance,
    logger,
  };
}

/** A logger is an object with a `warn` method and, optionally, a `debug` method. */
function checkLogger(logger: unknown): RedlockLogger {
  if (logger === null || typeof logger !== 'object') {
    throw configError('logger', `must be an object with a warn() method, got ${describe(logger)}`);
  }
  const l = logger as Partial<Record<keyof RedlockLogger, unknown>>;
  if (typeof l.warn !== 'function') throw configError('logger', 'must have a warn() method');
  if (l.debug !== undefined && typeof l.debug !== 'function') {
    throw configError('logger.debug', `must be a function, got ${describe(l.debug)}`);
  }
  return logger as RedlockLogger;
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
