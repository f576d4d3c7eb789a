import type { ExecutionContext } from '@nestjs/common';

/** What `@Locked()` does when the resource is held by someone else. */
export type OnLocked =
  /** Fail at once (HTTP 423/409, RPC/WS exception, or `LockContendedError` for plain methods). */
  | 'throw'
  /**
   * Do not run the method; it resolves to `undefined`. Also skips (instead of failing) when the
   * application is shutting down and takes no new locks. The natural choice for cron jobs.
   */
  | 'skip'
  /** Wait (retrying, woken by releases) up to `waitTimeout` ms, then fail like `throw`. */
  | 'wait';

/** What a resource template or function can read about the call being locked. */
export interface LockedCallContext {
  /** The method's arguments, as called. */
  readonly args: readonly unknown[];
  /** Class that declares the method. */
  readonly target: object;
  /** Method name. */
  readonly method: string;
  /** The Nest execution context, when the call goes through the interceptor (handlers). */
  readonly context?: ExecutionContext;
  /**
   * HTTP route params (handlers over HTTP; on a direct call of a handler, from its `@Param()`
   * and `@Req()` arguments).
   */
  readonly params?: Record<string, unknown>;
  /** HTTP query (handlers over HTTP; on a direct call, from `@Query()` / `@Req()` arguments). */
  readonly query?: Record<string, unknown>;
  /** HTTP body (handlers over HTTP; on a direct call, from `@Body()` / `@Req()` arguments). */
  readonly body?: unknown;
  /**
   * RPC / WebSocket payload, GraphQL args (on a direct call of a message handler, from its
   * `@Payload()` / `@MessageBody()` argument).
   */
  readonly data?: unknown;
}

/** A function that computes the resources of a call. */
export type LockedResourceFactory = (call: LockedCallContext) => string | string[];

/**
 * Resources of a `@Locked()` method:
 * - a static string or list: `'reports:daily'`;
 * - a template with `{path}` placeholders read from the {@link LockedCallContext}:
 *   `'order:{params.id}'`, `'sku:{body.sku}'`, `'user:{args.0.userId}'`, `'room:{data.room}'`;
 *   a placeholder that resolves to `undefined`, `null`, `''` or an object is an error;
 * - a function of the {@link LockedCallContext}.
 */
export type LockedResources = string | string[] | LockedResourceFactory;

/** Options of `@Locked()`. Unset fields come from `lockedDefaults`, then the module options. */
export interface LockedOptions {
  /** Lock ttl in ms. */
  ttl?: number;
  /** Retries on contention (only with `onLocked: 'wait'`). */
  retryCount?: number;
  /** Base delay between retries in ms. */
  retryDelay?: number;
  /** Random ± spread of the retry delay in ms. */
  retryJitter?: number;
  /** Overall wait deadline in ms with `onLocked: 'wait'`. */
  waitTimeout?: number;
  /** When the resource is held elsewhere. Default `'throw'` (handlers and methods alike). */
  onLocked?: OnLocked;
  /** Extend the lock automatically while the method runs. Default `true`. */
  autoExtend?: boolean;
  /**
   * Keep the resource locked at least this many ms after the grant, even when the method ends
   * sooner (ShedLock's `lockAtLeastFor`): the release then shortens the keys' TTL to the
   * remainder instead of deleting them, so a replica whose timer fires a little later finds the
   * job locked and skips it. For scheduled jobs:
   * `@Cron('0 3 * * *') @Locked('reports:daily', { onLocked: 'skip', lockAtLeastFor: 30_000 })`.
   * An integer in [0, the engine's `maxTtl`].
   */
  lockAtLeastFor?: number;
  /**
   * Take a shared (read) lock: calls holding it run together, never together with a plain
   * `@Locked()` (or `acquire`) of the same resource. Not in `lockedDefaults`; not with `limit`.
   */
  shared?: boolean;
  /**
   * Take one of `limit` slots of a counting semaphore: at most `limit` calls hold the resource at
   * once. Every holder of the resource must use the same limit. Not in `lockedDefaults`; not with
   * `shared`.
   */
  limit?: number;
}

/** What `@Locked()` records under the `LOCKED_METADATA` key of a method. */
export interface LockedMetadata {
  /** Resources as written in the decorator (templates unresolved). */
  readonly resources: LockedResources;
  /** Options as written in the decorator (module `lockedDefaults` are applied at call time). */
  readonly options: Readonly<LockedOptions>;
}
