import { HttpException, HttpStatus } from '@nestjs/common';
import { LOCK_UNAVAILABLE_MESSAGE } from '../redlock.messages';
import type { LockHttpErrorBody } from './resource-locked.error';

/**
 * HTTP 503 Service Unavailable: the lock could not be decided (too few Redis masters reachable,
 * or the lock the call relied on was lost). Retrying later may succeed.
 */
export class LockUnavailableException extends HttpException {
  /** The resources the lock was about. */
  readonly resources: readonly string[];
  /** Suggested wait before retrying, in whole seconds (≥ 1), sent as `Retry-After`. */
  readonly retryAfter: number;

  constructor(
    resources: readonly string[],
    options: { message?: string; retryAfter?: number; cause?: unknown } = {},
  ) {
    const body: LockHttpErrorBody = {
      statusCode: HttpStatus.SERVICE_UNAVAILABLE,
      error: 'Service Unavailable',
      message: options.message ?? LOCK_UNAVAILABLE_MESSAGE,
      resources: [...resources],
    };
    super(body, HttpStatus.SERVICE_UNAVAILABLE, { cause: options.cause });
    this.resources = body.resources;
    this.retryAfter = Math.max(1, Math.ceil(options.retryAfter ?? 1));
  }
}
