import { BadRequestException, Injectable } from '@nestjs/common';
import type { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { Observable, finalize } from 'rxjs';
import type { Subscription } from 'rxjs';
import {
  InvalidArgumentError,
  LockContendedError,
  LockLostError,
  NoQuorumError,
  ShuttingDownError,
  WaitTimeoutError,
} from '../core';
import { resolveResources } from '../decorators/resolve-resources';
import type { AnyMethod } from '../decorators/locked-method';
import {
  LockUnavailableException,
  ResourceLockedException,
  createRpcLockException,
  createWsLockException,
} from '../errors';
import type { LockErrorCode, LockErrorPayload } from '../errors';
import type { LockedCallContext, LockedMetadata } from '../interfaces';
import { LOCKED_METADATA } from '../redlock.constants';
import {
  LOCK_LOST_MESSAGE,
  LOCK_UNAVAILABLE_MESSAGE,
  RESOURCE_LOCKED_MESSAGE,
  SHUTTING_DOWN_MESSAGE,
} from '../redlock.messages';
import { RedlockService } from '../redlock.service';

/** Transports the interceptor knows. */
export type LockedContextType = 'http' | 'rpc' | 'ws' | 'graphql';

/** A lock failure, independent of the transport. */
export interface LockFailure {
  /** What went wrong. */
  readonly code: LockErrorCode;
  /** The resources concerned. */
  readonly resources: readonly string[];
  /** For contention: suggested wait in whole seconds (≥ 1). */
  readonly retryAfter?: number;
  /** The engine error. */
  readonly error: Error;
}

/**
 * Locks `@Locked()` handlers of every transport (HTTP on Express or Fastify, microservices,
 * WebSockets, GraphQL) and maps lock failures to the transport.
 *
 * The lock is held while the handler runs and, for Observable handlers (SSE, streams), until
 * the Observable completes, errors or is unsubscribed (client gone) — released exactly once.
 * Errors thrown by the handler itself pass through untouched.
 *
 * Extension points (override in a subclass and use it in `@UseInterceptors()`):
 * {@link createCallContext}, {@link resolveResources}, {@link classifyError}, {@link mapError},
 * {@link onSkipped}.
 */
@Injectable()
export class LockedInterceptor implements NestInterceptor {
  constructor(
    protected readonly redlock: RedlockService,
    protected readonly reflector: Reflector,
  ) {}

  /** Locks around the handler when it carries `@Locked()` metadata. */
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const handler = context.getHandler() as AnyMethod;
    const metadata = this.reflector.get<LockedMetadata | undefined>(LOCKED_METADATA, handler);
    if (!metadata) return next.handle();
    return new Observable<unknown>((subscriber) => {
      const abort = new AbortController();
      let inner: Subscription | undefined;
      let closed = false;
      const enter = async () => {
        const resources = this.resolveResources(metadata, this.createCallContext(context));
        return this.redlock.enterLocked(resources, metadata.options, {
          pending: metadata,
          signal: abort.signal,
        });
      };
      enter().then(
        (entry) => {
          if (closed) {
            void entry?.exit();
            return;
          }
          if (!entry) {
            subscriber.next(this.onSkipped(context));
            subscriber.complete();
            return;
          }
          inner = entry
            .run(() => next.handle())
            .pipe(finalize(() => void entry.exit()))
            .subscribe(subscriber);
        },
        (err: unknown) => {
          if (!closed) subscriber.error(this.mapError(err, context));
        },
      );
      return () => {
        closed = true;
        abort.abort();
        inner?.unsubscribe();
      };
    });
  }

  /**
   * What resource templates and functions can read: the raw handler arguments, plus
   * `params`/`query`/`body` over HTTP and `data` (payload, GraphQL args) over RPC, WS and GraphQL.
   */
  protected createCallContext(context: ExecutionContext): LockedCallContext {
    const args = context.getArgs();
    const base = { args, target: context.getClass(), method: context.getHandler().name, context };
    switch (context.getType<LockedContextType>()) {
      case 'http': {
        const req = context.switchToHttp().getRequest<{
          params?: Record<string, unknown>;
          query?: Record<string, unknown>;
          body?: unknown;
        }>();
        return { ...base, params: req?.params, query: req?.query, body: req?.body };
      }
      case 'rpc':
        return { ...base, data: context.switchToRpc().getData() };
      case 'ws':
        return { ...base, data: context.switchToWs().getData() };
      case 'graphql':
        return { ...base, data: args[1] };
      default:
        return base;
    }
  }

  /** Computes the resources of this call (templates or function of the call context). */
  protected resolveResources(metadata: LockedMetadata, call: LockedCallContext): string[] {
    return resolveResources(metadata.resources, call);
  }

  /**
   * The value emitted when `onLocked: 'skip'` skips the handler. Default `undefined`: over HTTP
   * Nest then answers with the route's usual status and an empty body.
   */
  protected onSkipped(_context: ExecutionContext): unknown {
    return undefined;
  }

  /** Sorts an engine error into a transport-independent failure, or `undefined` if foreign. */
  protected classifyError(error: unknown): LockFailure | undefined {
    const cause = error instanceof WaitTimeoutError ? error.cause : error;
    if (cause instanceof LockContendedError) {
      return {
        code: 'LOCK_CONTENDED',
        resources: cause.resources,
        retryAfter: Math.max(1, Math.ceil((cause.retryAfter ?? 0) / 1000)),
        error: error as Error,
      };
    }
    if (cause instanceof NoQuorumError) {
      return { code: 'NO_QUORUM', resources: cause.resources, error: error as Error };
    }
    if (error instanceof WaitTimeoutError) {
      return { code: 'NO_QUORUM', resources: error.resources, error };
    }
    if (error instanceof LockLostError) {
      return { code: 'LOCK_LOST', resources: error.resources, error };
    }
    if (error instanceof ShuttingDownError) {
      return { code: 'SHUTTING_DOWN', resources: error.resources, error };
    }
    if (error instanceof InvalidArgumentError) {
      return { code: 'INVALID_ARGUMENT', resources: [], error };
    }
    return undefined;
  }

  /**
   * Turns a failure to lock into the transport's exception:
   * - HTTP / GraphQL: contention → {@link ResourceLockedException} (423, or 409 with
   *   `contentionStatus: 409`) and a `Retry-After` header; no quorum, wait timeout without a
   *   holder, a lost lock, or a new lock refused during shutdown (with `Connection: close`)
   *   → {@link LockUnavailableException} (503); an unresolvable resource template →
   *   `BadRequestException` (400);
   * - RPC → `RpcException`, WS → `WsException`, with a {@link LockErrorPayload}.
   * Anything else is returned unchanged.
   */
  protected mapError(error: unknown, context: ExecutionContext): unknown {
    const failure = this.classifyError(error);
    if (!failure) return error;
    const type = context.getType<LockedContextType>();
    if (type === 'rpc' || type === 'ws') {
      const payload: LockErrorPayload = {
        status: 'error',
        code: failure.code,
        message: messageOf(failure),
        resources: [...failure.resources],
        ...(failure.retryAfter !== undefined ? { retryAfter: failure.retryAfter } : {}),
      };
      return type === 'rpc' ? createRpcLockException(payload) : createWsLockException(payload);
    }
    if (type !== 'http' && type !== 'graphql') return error;
    switch (failure.code) {
      case 'LOCK_CONTENDED': {
        const exception = new ResourceLockedException(failure.resources, {
          status: this.redlock.options.contentionStatus,
          retryAfter: failure.retryAfter,
          cause: failure.error,
        });
        if (type === 'http') this.setHeader(context, 'Retry-After', String(exception.retryAfter));
        return exception;
      }
      case 'INVALID_ARGUMENT':
        return new BadRequestException(failure.error.message, { cause: failure.error });
      default:
        // Keep-alive clients should reconnect, to an instance that is not going away.
        if (failure.code === 'SHUTTING_DOWN' && type === 'http') {
          this.setHeader(context, 'Connection', 'close');
        }
        return new LockUnavailableException(failure.resources, {
          message: messageOf(failure),
          cause: failure.error,
        });
    }
  }

  /** Sets a response header on Express (`setHeader`) or Fastify (`header`) responses. */
  protected setHeader(context: ExecutionContext, name: string, value: string): void {
    const res = context.switchToHttp().getResponse<{
      header?: (name: string, value: string) => unknown;
      setHeader?: (name: string, value: string) => unknown;
      headersSent?: boolean;
      sent?: boolean;
    }>();
    if (!res || res.headersSent || res.sent) return;
    if (typeof res.header === 'function') res.header(name, value);
    else if (typeof res.setHeader === 'function') res.setHeader(name, value);
  }
}

function messageOf(failure: LockFailure): string {
  switch (failure.code) {
    case 'LOCK_CONTENDED':
      return RESOURCE_LOCKED_MESSAGE;
    case 'LOCK_LOST':
      return LOCK_LOST_MESSAGE;
    case 'SHUTTING_DOWN':
      return SHUTTING_DOWN_MESSAGE;
    case 'INVALID_ARGUMENT':
      return failure.error.message;
    default:
      return LOCK_UNAVAILABLE_MESSAGE;
  }
}
