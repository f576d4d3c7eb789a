import type { RedisOptions } from 'ioredis';
import type { RedlockClient, ResolvedSettings, RedlockSettings } from '../core';
import type { RedlockTelemetryOptions } from '../telemetry/opentelemetry';
import type { LockedOptions, OnLocked } from './locked-options.interface';

/**
 * One Redis master, given as
 * - a connection URL: `redis://[user:password@]host:port[/db]` or `rediss://...` (TLS);
 * - ioredis options (`{ host, port, password, tls, ... }`);
 * - an existing client (never closed by the module): an ioredis or iovalkey `Redis` or `Cluster`
 *   instance, or a connected node-redis client or Cluster client (docs/clients.md).
 *
 * URLs and options create ioredis clients.
 */
export type RedlockClientOption = string | RedisOptions | RedlockClient;

/** HTTP status used when a `@Locked()` handler finds its resource held by someone else. */
export type ContentionStatus = 423 | 409;

/** Options of `RedlockModule.forRoot()` (and the object returned by `forRootAsync` factories). */
export interface RedlockModuleOptions extends Omit<RedlockSettings, 'logger'> {
  /** The independent Redis masters (3 or 5 recommended). */
  clients: RedlockClientOption[];
  /**
   * ioredis options applied to every client the module creates from a URL or an options object
   * (they override the module's lock-friendly defaults; a client's own options override them).
   */
  clientOptions?: RedisOptions;
  /** HTTP status for contention on `@Locked()` handlers. Default 423 (Locked). */
  contentionStatus?: ContentionStatus;
  /** Defaults for every `@Locked()` method; per-decorator options win. */
  lockedDefaults?: LockedOptions;
  /**
   * How long (ms) application shutdown waits for running locked calls to finish (no new locks
   * are taken meanwhile: they fail with `ShuttingDownError`, 503 over HTTP) before
   * releasing their locks and closing the clients. Default 10 000.
   */
  shutdownTimeout?: number;
  /**
   * OpenTelemetry spans and metrics (see `instrumentRedlock`). Default: on when the package
   * `@opentelemetry/api` is installed (it records into whatever SDK the app registered, and costs
   * nothing without one), off otherwise — nothing is loaded then. `false` switches it off;
   * `true` or an options object requires the package (startup fails with a clear error without it).
   */
  telemetry?: boolean | RedlockTelemetryOptions;
}

/** `lockedDefaults` after validation: the two behaviour switches always have a value. */
export type ResolvedLockedDefaults = Readonly<
  Omit<LockedOptions, 'onLocked' | 'autoExtend'> & { onLocked: OnLocked; autoExtend: boolean }
>;

/**
 * The module options after `normalizeOptions()`: validated, with every default filled in.
 * Injectable with the `REDLOCK_MODULE_OPTIONS` token. `forRoot` and `forRootAsync` produce
 * identical objects for the same input.
 */
export interface ResolvedRedlockModuleOptions extends Omit<ResolvedSettings, 'logger'> {
  /** The masters, as given (URLs, option objects or instances), in order. */
  readonly clients: readonly RedlockClientOption[];
  /** ioredis options for created clients (defaults merged in). */
  readonly clientOptions: Readonly<RedisOptions>;
  /** HTTP status for contention. */
  readonly contentionStatus: ContentionStatus;
  /** Defaults of every `@Locked()` method. */
  readonly lockedDefaults: ResolvedLockedDefaults;
  /** Shutdown grace period for running locked calls, in ms. */
  readonly shutdownTimeout: number;
  /** `'auto'` (default: on if `@opentelemetry/api` is installed), off, or on with options. */
  readonly telemetry: 'auto' | false | RedlockTelemetryOptions;
}

/** A class usable with `RedlockModule.forRootAsync({ useClass })` or `{ useExisting }`. */
export interface RedlockOptionsFactory {
  /** Returns the module options (sync or async). */
  createRedlockOptions(): RedlockModuleOptions | Promise<RedlockModuleOptions>;
}
