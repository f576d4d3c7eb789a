/**
 * Texts of the exceptions and log lines of the Nest layer, kept together (as @nestjs/schedule
 * does) so they can be read, reviewed and matched in one place.
 */

/** Default message of `ResourceLockedException` (HTTP 423/409): the resource is held elsewhere. */
export const RESOURCE_LOCKED_MESSAGE = 'The resource is locked by another operation; retry later';

/** Default message of `LockUnavailableException` (HTTP 503): too few Redis masters answered. */
export const LOCK_UNAVAILABLE_MESSAGE =
  'The lock service is unavailable (too few Redis masters reachable); retry later';

/** Message when the lock the current call chain relied on was lost while it ran. */
export const LOCK_LOST_MESSAGE = 'The lock protecting this operation was lost';

/** Message of the 503 / RPC / WS error when a new lock is refused because the app shuts down. */
export const SHUTTING_DOWN_MESSAGE =
  'The service is shutting down and takes no new locks; retry on another instance';

/**
 * Message of the 409 / RPC / WS error when the resource is locked with another kind of lock
 * (plain, shared, or a semaphore with another limit): a programming error, retrying does not help.
 */
export const KIND_MISMATCH_MESSAGE =
  'The resource is locked with another kind of lock (plain, shared or another semaphore limit)';

/** Message of a RPC/WebSocket error for a resource template that could not be resolved. */
export const INVALID_LOCK_RESOURCE_MESSAGE = 'The lock resource could not be resolved';

/** Log line when a `@Locked()` method runs on an instance the module never saw. */
export const unboundMethodMessage = (method: string): string =>
  `@Locked() method ${method} was called on an instance that RedlockModule has not registered ` +
  '(an instance created with `new`, a request-scoped provider, or a call made before the ' +
  'application finished its init phase); refusing to run it without its lock';

/**
 * Startup warning: a `@Locked()` template of an HTTP handler names a route parameter that the
 * route does not have.
 */
export const missingRouteParamMessage = (
  method: string,
  missing: { template: string; placeholder: string; routeParams: readonly string[] },
): string =>
  `@Locked('${missing.template}') on ${method}: placeholder {${missing.placeholder}} names a ` +
  `route parameter the route does not have (its parameters: ${missing.routeParams.length > 0 ? missing.routeParams.join(', ') : 'none'}); ` +
  'every request to it will answer 400 until the template or the route is fixed';

/**
 * Server log line (once per method and placeholder) when a `@Locked()` resource cannot be
 * resolved for a call; the client gets a 400 without the template or method names.
 */
export const unresolvedResourceMessage = (detail: string): string =>
  `${detail}: the call was refused (over HTTP: 400); logged once per method and placeholder`;

/** Log line for `@Locked()` on a provider whose scope is not static. */
export const nonStaticProviderMessage = (method: string): string =>
  `@Locked() on ${method} is ignored by the explorer: the provider is request-scoped or transient ` +
  '(only singletons are supported; handlers still lock through the interceptor)';

/** Log line when a created client reports errors (redacted name). */
export const masterErrorMessage = (name: string, error: string, suppressed: number): string =>
  `Redis master ${name} unavailable: ${error}; reconnecting in the background` +
  (suppressed > 0 ? ` (${suppressed} similar errors suppressed)` : '');

/** Log line when a created client is ready again after errors. */
export const masterReadyMessage = (name: string): string =>
  `Redis master ${name} is reachable again`;

/** Log line when shutdown stops waiting for running locked calls. */
export const shutdownTimeoutMessage = (running: number, timeout: number): string =>
  `${running} locked call(s) still running after ${timeout} ms; releasing their locks and closing`;

/** Log line when a release fails (the lock then expires on its own after its ttl). */
export const releaseFailedMessage = (resources: readonly string[], error: string): string =>
  `Release of ${resources.join(', ')} failed (${error}); the lock expires with its ttl`;

/** Log line when masters are unreachable at startup. */
export const startupUnreachableMessage = (
  down: readonly string[],
  total: number,
  quorum: number,
): string =>
  `${down.length} of ${total} Redis masters unreachable at startup (${down.join(', ')}); ` +
  (total - down.length >= quorum
    ? `locking works with the remaining ${total - down.length} (quorum ${quorum})`
    : `locks fail with NoQuorumError until ${quorum} masters are reachable`);

/** Log line when a held lock was lost (its validity ended, or a majority no longer held it). */
export const lockLostMessage = (error: string, holdTime: number): string =>
  `${error} (after ${Math.round(holdTime)} ms); the work it protected may have overlapped ` +
  'with another holder: make it idempotent or fence it (fencing tokens)';

/** Log line when acquisitions fail for lack of a quorum (rate-limited). */
export const noQuorumMessage = (error: string, suppressed: number): string =>
  `Lock unavailable: ${error}` +
  (suppressed > 0 ? ` (${suppressed} similar failures since the last report)` : '');
