import { SetMetadata, UseInterceptors } from '@nestjs/common';
import { InvalidConfigurationError } from '../core';
import { checkLockedOptions } from '../options';
import { LOCKED_METADATA } from '../redlock.constants';
import { LockedInterceptor } from '../interceptors/locked.interceptor';
import type { LockedMetadata, LockedOptions, LockedResources } from '../interfaces';
import { checkLockedResources } from '../locked/resolve-resources';
import { wrapLockedMethod } from '../locked/locked-method';
import type { AnyMethod } from '../locked/locked-method';

const configError = (field: string, problem: string): Error =>
  new InvalidConfigurationError(field, problem);

/**
 * Runs the method under a distributed lock on `resources`.
 *
 * - On controller handlers (HTTP, microservices, WebSockets, GraphQL) the `LockedInterceptor`
 *   locks, and maps failures to the transport (HTTP 423/409 + `Retry-After`, 503, 400;
 *   `RpcException` / `WsException` with `{ status, code, message, resources }`).
 * - On any other provider method (`@Cron`, queue consumers, plain service calls) the method is
 *   wrapped: it returns a Promise and rejects with the engine's errors (`LockContendedError`,
 *   `NoQuorumError`, ...).
 * - Exactly one acquisition per call; reentrant within one call chain; released exactly once.
 *
 * Templates such as `'order:{params.id}'` are checked here, when the class is defined.
 *
 * @example
 * ```ts
 * @Post(':id/pay')
 * @Locked('order:{params.id}', { ttl: 5000 })
 * pay(@Param('id') id: string) { ... }
 *
 * @Cron('0 * * * *')
 * @Locked('reports:hourly', { onLocked: 'skip' })
 * async hourly() { ... }
 * ```
 */
export function Locked(resources: LockedResources, options: LockedOptions = {}): MethodDecorator {
  return <T>(
    target: object,
    key: string | symbol,
    descriptor: TypedPropertyDescriptor<T>,
  ): TypedPropertyDescriptor<T> => {
    const owner = typeof target === 'function' ? target : target.constructor;
    const where = `${(owner as { name?: string }).name ?? 'anonymous'}.${String(key)}`;
    if (typeof descriptor.value !== 'function') {
      throw new InvalidConfigurationError(where, '@Locked() applies to methods only');
    }
    checkLockedResources(resources, where);
    const metadata: LockedMetadata = {
      resources: Array.isArray(resources) ? [...resources] : resources,
      options: Object.freeze(checkLockedOptions(options, where, undefined, configError)),
    };
    descriptor.value = wrapLockedMethod(descriptor.value as AnyMethod, where) as T;
    SetMetadata(LOCKED_METADATA, metadata)(target, key, descriptor);
    UseInterceptors(LockedInterceptor)(target, key, descriptor);
    return descriptor;
  };
}
