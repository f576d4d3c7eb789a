import { BadRequestException, ConflictException } from '@nestjs/common';
import type { HttpException } from '@nestjs/common';
import {
  InvalidArgumentError,
  KindMismatchError,
  LockContendedError,
  LockLostError,
  NoQuorumError,
  ShuttingDownError,
  WaitTimeoutError,
} from '../core/base/errors';
import type { ContentionStatus } from '../interfaces/redlock-module-options.interface';
import {
  LOCK_LOST_MESSAGE,
  KIND_MISMATCH_MESSAGE,
  LOCK_UNAVAILABLE_MESSAGE,
  RESOURCE_LOCKED_MESSAGE,
  SHUTTING_DOWN_MESSAGE,
} from '../redlock.messages';
import { UnresolvedResourceError } from '../locked/resolve-resources';
import { LockUnavailableException } from './lock-unavailable.error';
import { ResourceLockedException } from './resource-locked.error';
import type { LockErrorCode, LockErrorPayload } from './transport.error';

/*
 * How a lock failure answers on each transport, as pure functions shared by the @Locked
 * interceptor (failures to lock a handler) and the module's exception filter (lock errors thrown
 * anywhere else during a request: a @Locked provider method, RedlockService.acquire() in a
 * handler, a lost lock).
 */

/** A lock failure, independent of the transport. */
export interface LockFailure {
  /** What went wrong. */
  readonly code: LockErrorCode;
  /** The resources concerned. */
  readonly resources: readonly string[];
  /** Suggested wait before retrying, in whole seconds (≥ 1); for every code but invalid input. */
  readonly retryAfter?: number;
  /** The engine error. */
  readonly error: Error;
}

/** Sorts an engine error into a transport-independent failure, or `undefined` if foreign. */
export function classifyLockError(error: unknown): LockFailure | undefined {
  const cause = error instanceof WaitTimeoutError ? error.cause : error;
  if (cause instanceof LockContendedError) {
    const retryAfter = Math.max(1, Math.ceil((cause.retryAfter ?? 0) / 1000));
    return {
      code: 'LOCK_CONTENDED',
      resources: cause.resources,
      retryAfter,
      error: error as Error,
    };
  }
  if (cause instanceof NoQuorumError) {
    const retryAfter = noQuorumRetryAfter(cause);
    return { code: 'NO_QUORUM', resources: cause.resources, retryAfter, error: error as Error };
  }
  if (error instanceof WaitTimeoutError) {
    return { code: 'NO_QUORUM', resources: error.resources, retryAfter: 1, error };
  }
  if (error instanceof LockLostError) {
    return { code: 'LOCK_LOST', resources: error.resources, retryAfter: 1, error };
  }
  if (error instanceof ShuttingDownError) {
    return { code: 'SHUTTING_DOWN', resources: error.resources, retryAfter: 1, error };
  }
  if (error instanceof InvalidArgumentError) {
    return { code: 'INVALID_ARGUMENT', resources: [], error };
  }
  if (error instanceof KindMismatchError) {
    // A programming error (two code paths lock one resource with different kinds): retrying
    // cannot help, so no Retry-After.
    return { code: 'KIND_MISMATCH', resources: error.resources, error };
  }
  return undefined;
}

/**
 * When trying again after a {@link NoQuorumError} can succeed, in whole seconds (≥ 1): the time
 * until `quorum` masters can vote, a master in restart quarantine counting from the end of its
 * quarantine and any other master (down, slow, busy) from now, since it may be back at any
 * moment. While fresh masters are in quarantine this is the remaining quarantine of the
 * quorum-th soonest master, not a second.
 */
export function noQuorumRetryAfter(error: NoQuorumError): number {
  const usableIn = error.votes
    .map((v) => (v.outcome === 'quarantined' ? (v.quarantineRemaining ?? 0) : 0))
    .sort((a, b) => a - b);
  const wait = error.quorum >= 1 ? (usableIn[error.quorum - 1] ?? 0) : 0;
  return Math.max(1, Math.ceil(wait / 1000));
}

/** The message sent to clients (engine details such as votes stay in the server's logs). */
export function lockFailureMessage(failure: LockFailure): string {
  switch (failure.code) {
    case 'LOCK_CONTENDED':
      return RESOURCE_LOCKED_MESSAGE;
    case 'LOCK_LOST':
      return LOCK_LOST_MESSAGE;
    case 'SHUTTING_DOWN':
      return SHUTTING_DOWN_MESSAGE;
    case 'INVALID_ARGUMENT':
      return failure.error instanceof UnresolvedResourceError
        ? failure.error.clientMessage
        : failure.error.message;
    case 'KIND_MISMATCH':
      return KIND_MISMATCH_MESSAGE;
    default:
      return LOCK_UNAVAILABLE_MESSAGE;
  }
}

/** The payload of the RPC / WebSocket error for a failure. */
export function lockErrorPayload(failure: LockFailure): LockErrorPayload {
  return {
    status: 'error',
    code: failure.code,
    message: lockFailureMessage(failure),
    resources: [...failure.resources],
    ...(failure.retryAfter !== undefined ? { retryAfter: failure.retryAfter } : {}),
  };
}

/** The `extensions` of the GraphQL error for a lock failure (`extensions.code` and the rest). */
export type LockGraphQLErrorExtensions = Omit<LockErrorPayload, 'status' | 'message'>;

/**
 * The GraphQL answer: an `Error` with the failure's message and GraphQL `extensions` —
 * `{ code, resources, retryAfter }`, the fields of the RPC / WebSocket payload — thrown from the
 * resolver. graphql-js copies an error's `extensions` onto the `GraphQLError` it builds, so any
 * driver (Apollo, Mercurius) answers `errors: [{ message, path, extensions: { code:
 * 'LOCK_CONTENDED', ... } }]` with HTTP 200. Deliberately not an `HttpException`: the Apollo
 * driver turns HTTP exceptions other than 400/401/403/422 into `INTERNAL_SERVER_ERROR`.
 * `cause` is the engine error (votes, attempts) for the server's logs.
 */
export function graphqlLockError(failure: LockFailure): Error {
  const { code, resources, retryAfter } = lockErrorPayload(failure);
  const extensions: LockGraphQLErrorExtensions = {
    code,
    resources,
    ...(retryAfter !== undefined ? { retryAfter } : {}),
  };
  return Object.assign(new Error(lockFailureMessage(failure), { cause: failure.error }), {
    extensions,
  });
}

/** An HTTP answer: the exception Nest turns into the response, plus headers to set first. */
export interface HttpLockAnswer {
  readonly exception: HttpException;
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * The HTTP answer: contention → {@link ResourceLockedException} (423, or 409) with
 * `Retry-After`; no quorum, a wait timeout, a lost lock, or a lock refused during shutdown →
 * {@link LockUnavailableException} (503) with `Retry-After` (and `Connection: close` during
 * shutdown, so that keep-alive clients reconnect to an instance that is not going away);
 * invalid resource input → `BadRequestException` (400); a kind mismatch (the resource is locked
 * with another kind: plain, shared, another semaphore limit) → `ConflictException` (409), without
 * `Retry-After`: waiting does not help.
 */
export function httpLockAnswer(
  failure: LockFailure,
  contentionStatus: ContentionStatus,
): HttpLockAnswer {
  switch (failure.code) {
    case 'LOCK_CONTENDED': {
      const exception = new ResourceLockedException(failure.resources, {
        status: contentionStatus,
        retryAfter: failure.retryAfter,
        cause: failure.error,
      });
      return { exception, headers: { 'Retry-After': String(exception.retryAfter) } };
    }
    case 'INVALID_ARGUMENT':
      return {
        exception: new BadRequestException(lockFailureMessage(failure), { cause: failure.error }),
        headers: {},
      };
    case 'KIND_MISMATCH':
      return {
        exception: new ConflictException(KIND_MISMATCH_MESSAGE, { cause: failure.error }),
        headers: {},
      };
    default: {
      const exception = new LockUnavailableException(failure.resources, {
        message: lockFailureMessage(failure),
        retryAfter: failure.retryAfter,
        cause: failure.error,
      });
      const headers: Record<string, string> = { 'Retry-After': String(exception.retryAfter) };
      if (failure.code === 'SHUTTING_DOWN') headers.Connection = 'close';
      return { exception, headers };
    }
  }
}

/** Minimal shape of an Express or Fastify response, enough to set a header. */
interface HeaderTarget {
  header?: (name: string, value: string) => unknown;
  setHeader?: (name: string, value: string) => unknown;
  headersSent?: boolean;
  sent?: boolean;
}

/** Sets headers on an Express (`setHeader`) or Fastify (`header`) response not yet sent. */
export function setResponseHeaders(
  response: unknown,
  headers: Readonly<Record<string, string>>,
): void {
  const res = response as HeaderTarget | undefined;
  if (!res || res.headersSent || res.sent) return;
  for (const [name, value] of Object.entries(headers)) {
    if (typeof res.header === 'function') res.header(name, value);
    else if (typeof res.setHeader === 'function') res.setHeader(name, value);
  }
}
