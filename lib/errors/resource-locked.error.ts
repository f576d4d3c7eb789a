import { HttpException } from '@nestjs/common';
import type { ContentionStatus } from '../interfaces';
import { RESOURCE_LOCKED_MESSAGE } from '../redlock.messages';

/** JSON body of the HTTP exceptions of the Nest layer. */
export interface LockHttpErrorBody {
  /** HTTP status, repeated in the body like Nest's built-in exceptions. */
  readonly statusCode: number;
  /** Reason phrase (`Locked`, `Conflict`, `Service Unavailable`). */
  readonly error: string;
  /** Human-readable explanation. */
  readonly message: string;
  /** The resources the lock was about. */
  readonly resources: readonly string[];
}

/**
 * HTTP 423 Locked (or 409 Conflict with `contentionStatus: 409`): the resource is held by
 * another operation. `retryAfter` (seconds, ≥ 1) is also sent as the `Retry-After` header by
 * the `LockedInterceptor`; a custom exception filter can read it from here.
 */
export class ResourceLockedException extends HttpException {
  /** Suggested wait before retrying, in whole seconds (at least 1). */
  readonly retryAfter: number;
  /** The contended resources. */
  readonly resources: readonly string[];

  constructor(
    resources: readonly string[],
    options: {
      status?: ContentionStatus;
      retryAfter?: number;
      message?: string;
      cause?: unknown;
    } = {},
  ) {
    const status = options.status ?? 423;
    const body: LockHttpErrorBody = {
      statusCode: status,
      error: status === 409 ? 'Conflict' : 'Locked',
      message: options.message ?? RESOURCE_LOCKED_MESSAGE,
      resources: [...resources],
    };
    super(body, status, { cause: options.cause });
    this.retryAfter = Math.max(1, Math.ceil(options.retryAfter ?? 1));
    this.resources = body.resources;
  }
}
