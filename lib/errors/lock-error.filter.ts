import { Catch, Inject } from '@nestjs/common';
import type { ArgumentsHost } from '@nestjs/common';
import { BaseExceptionFilter } from '@nestjs/core';
import {
  InvalidArgumentError,
  KindMismatchError,
  LockContendedError,
  LockLostError,
  NoQuorumError,
  ShuttingDownError,
  WaitTimeoutError,
} from '../core/base/errors';
import type { ResolvedRedlockModuleOptions } from '../interfaces/redlock-module-options.interface';
import { REDLOCK_MODULE_OPTIONS } from '../redlock.constants';
import {
  classifyLockError,
  graphqlLockError,
  httpLockAnswer,
  lockErrorPayload,
  setResponseHeaders,
} from './lock-failure';
import { answerTransportLockError } from './transport.error';

/**
 * Answers lock errors thrown anywhere while a request is handled — a `@Locked()` provider method,
 * `RedlockService.acquire()` / `using()` called in a handler, a lock lost mid-request — exactly
 * as `@Locked()` answers on a handler: contention → 423 (or the configured `contentionStatus`)
 * with `Retry-After`; no quorum, a wait timeout, a lost lock, shutdown → 503 with `Retry-After`
 * (and `Connection: close` during shutdown); invalid resource input → 400; a kind mismatch → 409
 * (no `Retry-After`). Over RPC and
 * WebSockets the same `LockErrorPayload` as `@Locked()` handlers send; in GraphQL resolvers an
 * error with the same fields as `extensions` (`code: 'LOCK_CONTENDED'`, ...).
 *
 * `RedlockModule` registers it globally (`APP_FILTER`); opt out with
 * `RedlockModule.forRoot({ ..., exceptionFilter: false })`, e.g. to map the errors yourself. A
 * filter of your own that catches these error classes (or everything) on a controller or method
 * takes precedence over this global one.
 */
@Catch(
  LockContendedError,
  NoQuorumError,
  WaitTimeoutError,
  LockLostError,
  ShuttingDownError,
  InvalidArgumentError,
  KindMismatchError,
)
export class LockErrorFilter extends BaseExceptionFilter {
  constructor(
    @Inject(REDLOCK_MODULE_OPTIONS) private readonly redlockOptions: ResolvedRedlockModuleOptions,
  ) {
    super();
  }

  /** Maps the lock error to the transport of `host` and sends the answer. */
  override catch(exception: unknown, host: ArgumentsHost): unknown {
    const failure = classifyLockError(exception);
    const type = host.getType<'http' | 'rpc' | 'ws' | 'graphql'>();
    if (!failure) return type === 'http' ? super.catch(exception, host) : exception;
    switch (type) {
      case 'http': {
        const answer = httpLockAnswer(failure, this.redlockOptions.contentionStatus);
        setResponseHeaders(host.switchToHttp().getResponse(), answer.headers);
        return super.catch(answer.exception, host);
      }
      case 'rpc':
      case 'ws':
        return answerTransportLockError(type, lockErrorPayload(failure), host);
      case 'graphql':
        // The resolver rejects with it; the driver formats its `extensions` (code, resources).
        return graphqlLockError(failure);
      default:
        return httpLockAnswer(failure, this.redlockOptions.contentionStatus).exception;
    }
  }
}
