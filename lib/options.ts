import type { RedisOptions } from 'ioredis';
import { InvalidConfigurationError } from './core';
import type { RedlockSettings } from './core';
import { MAX_TIMER_MS } from './core/base/clock';
import { SETTING_NAMES, resolveSettings } from './core/base/settings';
import { MAX_LIMIT, checkInteger, checkRetryWait, checkTtl, describe } from './core/base/validate';
import type { TtlLimits } from './core/base/validate';
import { normalizeRedisUrl, redactUrl, urlUserInfoProblem } from './clients';
import { isRedlockClient } from './core/redis/connection/adapt';
import { ACCEPTED_CLIENTS, checkDistinctAddresses, foreignClient } from './master-identity';
import { checkTelemetryOptions } from './telemetry/opentelemetry';
import type {
  ContentionStatus,
  LockedOptions,
  RedlockClientOption,
  RedlockModuleOptions,
  ResolvedLockedDefaults,
  ResolvedRedlockModuleOptions,
} from './interfaces';

/** Default of `shutdownTimeout`, in ms. */
export const DEFAULT_SHUTDOWN_TIMEOUT = 10_000;

/**
 * ioredis settings of the clients the module creates: fail fast while a master is down (no
 * offline queue, no per-request retries — the engine's per-node timeout and quorum handle it),
 * connect quickly, reconnect forever in the background with a capped, jittered backoff.
 */
export const LOCK_FRIENDLY_CLIENT_OPTIONS: Readonly<RedisOptions> = Object.freeze({
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  connectTimeout: 2000,
  lazyConnect: false,
  // ioredis arms this timer even when disconnecting a client whose socket is already closed
  // (a master that is down): keep it short so that it never holds the process open for long.
  disconnectTimeout: 500,
  retryStrategy: (times: number): number =>
    Math.min(2000, 50 * 2 ** Math.min(times, 6)) + Math.floor(Math.random() * 50),
});

/** The engine settings a module option set carries (every setting but the logger: Nest's). */
const ENGINE_KEYS = SETTING_NAMES.filter(
  (k): k is Exclude<keyof RedlockSettings, 'logger'> => k !== 'logger',
);
const MODULE_KEYS: readonly string[] = Object.freeze([
  ...ENGINE_KEYS,
  'clients',
  'clientOptions',
  'contentionStatus',
  'lockedDefaults',
  'shutdownTimeout',
  'telemetry',
]);
const LOCKED_KEYS: readonly string[] = Object.freeze([
  'ttl',
  'retryCount',
  'retryDelay',
  'retryJitter',
  'waitTimeout',
  'onLocked',
  'autoExtend',
  'lockAtLeastFor',
  'shared',
  'limit',
]);
const ON_LOCKED = new Set<string>(['throw', 'skip', 'wait']);

const fail = (field: string, problem: string): Error =>
  new InvalidConfigurationError(field, problem);

/**
 * Validates the module options and fills in every default. The single place where `forRoot` and
 * `forRootAsync` options are checked, so both end in identical resolved options. Throws
 * {@link InvalidConfigurationError} naming the first offending field (`clients[1]`,
 * `lockedDefaults.onLocked`, `ttl`, ...). Never includes a password in its messages.
 */
export function normalizeOptions(options: RedlockModuleOptions): ResolvedRedlockModuleOptions {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw fail('options', `must be an object, got ${describe(options)}`);
  }
  for (const key of Object.keys(options)) {
    if (!MODULE_KEYS.includes(key)) {
      throw fail(key, `unknown option; valid names are ${MODULE_KEYS.join(', ')}`);
    }
  }
  const clients = options.clients === IN_MEMORY ? [] : checkClients(options.clients);
  return resolveModuleOptions(options, clients, Math.max(1, clients.length));
}

/**
 * Options of a module without Redis (the testing module): every rule of {@link normalizeOptions}
 * but `clients`, which stays empty; the engine settings are resolved for one simulated master.
 */
export function normalizeInMemoryOptions(
  options: Omit<RedlockModuleOptions, 'clients'>,
): ResolvedRedlockModuleOptions {
  return normalizeOptions({ ...options, clients: IN_MEMORY });
}

/** Marks the in-memory case for {@link normalizeOptions} (no client is ever created from it). */
const IN_MEMORY: RedlockModuleOptions['clients'] = [];

function resolveModuleOptions(
  options: RedlockModuleOptions,
  clients: readonly RedlockClientOption[],
  masters: number,
): ResolvedRedlockModuleOptions {
  const engineInput = Object.fromEntries(
    ENGINE_KEYS.filter((k) => options[k] !== undefined).map((k) => [k, options[k]]),
  );
  // The engine's own validation, so that the module and the engine agree on every rule.
  const { logger: _logger, ...engine } = resolveSettings(engineInput, masters);

  const contentionStatus: ContentionStatus = options.contentionStatus ?? 423;
  if (contentionStatus !== 423 && contentionStatus !== 409) {
    throw fail('contentionStatus', `must be 423 or 409, got ${describe(contentionStatus)}`);
  }
  const shutdownTimeout = checkInteger(
    'shutdownTimeout',
    options.shutdownTimeout ?? DEFAULT_SHUTDOWN_TIMEOUT,
    0,
    MAX_TIMER_MS,
    fail,
  );
  const clientOptions = options.clientOptions ?? {};
  if (clientOptions === null || typeof clientOptions !== 'object' || Array.isArray(clientOptions)) {
    throw fail(
      'clientOptions',
      `must be an ioredis options object, got ${describe(clientOptions)}`,
    );
  }
  const lockedDefaults = checkLockedOptions(
    options.lockedDefaults ?? {},
    'lockedDefaults',
    engine,
    fail,
  );
  for (const key of ['shared', 'limit'] as const) {
    if (lockedDefaults[key] !== undefined) {
      throw fail(`lockedDefaults.${key}`, 'the kind of lock is chosen per @Locked(), not for all');
    }
  }
  const telemetry =
    options.telemetry === undefined
      ? 'auto'
      : typeof options.telemetry === 'boolean'
        ? options.telemetry && {}
        : checkTelemetryOptions(options.telemetry);
  return {
    ...engine,
    telemetry,
    clients,
    clientOptions: { ...LOCK_FRIENDLY_CLIENT_OPTIONS, ...clientOptions },
    contentionStatus,
    lockedDefaults: {
      ...lockedDefaults,
      onLocked: lockedDefaults.onLocked ?? 'throw',
      autoExtend: lockedDefaults.autoExtend ?? true,
    } as ResolvedLockedDefaults,
    shutdownTimeout,
  };
}

function checkClients(clients: unknown): RedlockClientOption[] {
  if (!Array.isArray(clients) || clients.length === 0) {
    throw fail('clients', 'must be a non-empty array of URLs, ioredis options or instances');
  }
  const seen = new Set<unknown>();
  clients.forEach((c: unknown, i) => {
    const field = `clients[${i}]`;
    if (typeof c === 'string') {
      const problem = urlUserInfoProblem(c);
      if (problem) throw fail(field, problem);
      let url: URL | undefined;
      try {
        url = new URL(normalizeRedisUrl(c));
      } catch {
        url = undefined;
      }
      if (!url || (url.protocol !== 'redis:' && url.protocol !== 'rediss:') || !url.hostname) {
        throw fail(field, `must be a redis:// or rediss:// URL, got "${redactUrl(c)}"`);
      }
      return;
    }
    if (c === null || typeof c !== 'object' || Array.isArray(c)) {
      throw fail(
        field,
        `must be a URL, ioredis options or an ioredis instance, got ${describe(c)}`,
      );
    }
    const foreign = foreignClient(c);
    if (foreign !== undefined) {
      throw fail(
        field,
        `is ${foreign}, which is not supported: pass ${ACCEPTED_CLIENTS} (ioredis is a peer dependency)`,
      );
    }
    if (isRedlockClient(c)) {
      if (seen.has(c)) throw fail(field, 'the same client instance is listed twice');
      seen.add(c);
    } else if (typeof (c as { then?: unknown }).then === 'function') {
      throw fail(field, 'is a Promise; resolve it (forRootAsync) before passing it');
    }
  });
  checkDistinctAddresses(clients);
  return [...(clients as RedlockClientOption[])];
}

/**
 * Validates `@Locked()` options (also used by the decorator). With the engine's `limits` (module
 * `lockedDefaults`), `ttl` must be a ttl the engine can grant; without them (decoration time)
 * the engine checks it at call time. Returns the options without `undefined` fields.
 */
export function checkLockedOptions(
  options: unknown,
  field: string,
  limits: TtlLimits | undefined,
  make: (field: string, problem: string) => Error,
): LockedOptions {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw make(field, `must be an object, got ${describe(options)}`);
  }
  const o = options as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(o)) {
    if (!LOCKED_KEYS.includes(key)) {
      throw make(
        `${field}.${key}`,
        `unknown @Locked() option; valid names are ${LOCKED_KEYS.join(', ')}`,
      );
    }
    if (value === undefined) continue;
    const f = `${field}.${key}`;
    switch (key) {
      case 'ttl':
        out[key] = limits
          ? checkTtl(f, value, limits, make)
          : checkInteger(f, value, 1, MAX_TIMER_MS, make);
        break;
      case 'retryCount':
        out[key] = checkInteger(f, value, 0, 1_000_000, make);
        break;
      case 'retryDelay':
      case 'retryJitter':
      case 'waitTimeout':
        out[key] = checkInteger(f, value, 0, MAX_TIMER_MS, make);
        break;
      case 'onLocked':
        if (typeof value !== 'string' || !ON_LOCKED.has(value)) {
          throw make(f, `must be 'throw', 'skip' or 'wait', got ${describe(value)}`);
        }
        out[key] = value;
        break;
      case 'autoExtend':
      case 'shared':
        if (typeof value !== 'boolean') throw make(f, `must be a boolean, got ${describe(value)}`);
        out[key] = value;
        break;
      case 'lockAtLeastFor':
        // At most maxTtl (the restart quarantine is sized from it); without the engine's limits
        // (decoration time) the engine checks that at call time.
        out[key] = checkInteger(f, value, 0, limits ? limits.maxTtl : MAX_TIMER_MS, make);
        break;
      case 'limit':
        out[key] = checkInteger(f, value, 1, MAX_LIMIT, make);
        break;
    }
  }
  if (out.shared === true && out.limit !== undefined) {
    throw make(`${field}.limit`, 'a lock is either shared or a semaphore with a limit, not both');
  }
  if (out.retryDelay !== undefined && out.retryJitter !== undefined) {
    checkRetryWait(out.retryDelay as number, out.retryJitter as number, make, `${field}.`);
  }
  return out as LockedOptions;
}

/** The engine settings contained in resolved module options. */
export function engineSettingsOf(options: ResolvedRedlockModuleOptions): RedlockSettings {
  return Object.fromEntries(ENGINE_KEYS.map((k) => [k, options[k]])) as RedlockSettings;
}
