import { withFields } from '../core/base/fields';
import { Injectable } from '@nestjs/common';
import type { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { Observable, finalize } from 'rxjs';
import type { Subscription } from 'rxjs';
import { resolveResources } from '../locked/resolve-resources';
import type { AnyMethod } from '../locked/locked-method';
import { LockedRunner } from '../locked/locked-runner';
import {
  classifyLockError,
  graphqlLockError,
  httpLockAnswer,
  lockErrorPayload,
  setResponseHeaders,
} from '../errors/lock-failure';
import type { LockFailure } from '../errors/lock-failure';
import { createRpcLockException, createWsLockException } from '../errors/transport.error';
import type { LockedCallContext, LockedMetadata } from '../interfaces';
import { LOCKED_METADATA } from '../redlock.constants';

/** Transports the interceptor knows. */
export type LockedContextType = 'http' | 'rpc' | 'ws' | 'graphql';

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
    /** The `@Locked()` runtime of the module. */
    protected readonly runner: LockedRunner,
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
        return this.runner.enterLocked(resources, metadata.options, {
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
        return withFields(base, { params: req?.params, query: req?.query, body: req?.body });
      }
      case 'rpc':
        return withFields(base, { data: context.switchToRpc().getData() });
      case 'ws':
        return withFields(base, { data: context.switchToWs().getData() });
      case 'graphql':
        return withFields(base, { data: args[1] });
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
    return classifyLockError(error);
  }

  /**
   * Turns a failure to lock into the transport's exception:
   * - HTTP: contention → `ResourceLockedException` (423, or 409 with
   *   `contentionStatus: 409`) and a `Retry-After` header; no quorum, wait timeout without a
   *   holder, a lost lock, or a new lock refused during shutdown (with `Connection: close`)
   *   → `LockUnavailableException` (503) with `Retry-After`; an unresolvable resource
   *   template → `BadRequestException` (400);
   * - RPC → `RpcException`, WS → `WsException`, with a `LockErrorPayload`;
   * - GraphQL → an `Error` whose GraphQL `extensions` carry the payload's `code`, `resources`
   *   and `retryAfter` (`extensions.code: 'LOCK_CONTENDED'`, ...).
   * Anything else is returned unchanged.
   */
  protected mapError(error: unknown, context: ExecutionContext): unknown {
    const failure = this.classifyError(error);
    if (!failure) return error;
    const type = context.getType<LockedContextType>();
    if (type === 'rpc') return createRpcLockException(lockErrorPayload(failure));
    if (type === 'ws') return createWsLockException(lockErrorPayload(failure));
    if (type === 'graphql') return graphqlLockError(failure);
    if (type !== 'http') return error;
    const { exception, headers } = httpLockAnswer(failure, this.runner.options.contentionStatus);
    for (const [name, value] of Object.entries(headers)) this.setHeader(context, name, value);
    return exception;
  }

  /** Sets a response header on Express (`setHeader`) or Fastify (`header`) responses. */
  protected setHeader(context: ExecutionContext, name: string, value: string): void {
    setResponseHeaders(context.switchToHttp().getResponse(), { [name]: value });
  }
}
