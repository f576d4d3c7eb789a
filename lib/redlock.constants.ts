/**
 * Injection tokens and metadata keys of the Nest layer. Every key carries the `redlock:`
 * namespace so it cannot collide with another library's.
 */

/** Reflect-metadata key under which `@Locked()` stores its {@link LockedMetadata}. */
export const LOCKED_METADATA = 'redlock:locked';

/**
 * Injection token of the resolved module options ({@link ResolvedRedlockModuleOptions}): what
 * `normalizeOptions()` made of the options given to `forRoot` / `forRootAsync`.
 */
export const REDLOCK_MODULE_OPTIONS = 'redlock:module-options';

/** Injection token of the options exactly as given (before validation). Internal. */
export const REDLOCK_RAW_OPTIONS = 'redlock:raw-options';

/**
 * Injection token of the module's engine and its connections (a `RedlockBackend`): the module
 * builds one on Redis masters from the options, the testing module provides an in-memory one.
 * Internal.
 */
export const REDLOCK_BACKEND = 'redlock:backend';

/** Name of the Nest logger context used by the module. */
export const REDLOCK_LOGGER_CONTEXT = 'Redlock';
