/** Error codes sent to RPC and WebSocket clients. */
export type LockErrorCode =
  'LOCK_CONTENDED' | 'NO_QUORUM' | 'LOCK_LOST' | 'SHUTTING_DOWN' | 'INVALID_ARGUMENT';

/**
 * Payload of the `RpcException` / `WsException` raised by `@Locked()` handlers over
 * microservice and WebSocket transports. Nest's default filters send it to the client as is.
 */
export interface LockErrorPayload {
  /** Always `'error'`, like Nest's own RPC/WS error payloads. */
  readonly status: 'error';
  /** Machine-readable reason. */
  readonly code: LockErrorCode;
  /** Human-readable explanation. */
  readonly message: string;
  /** The resources the lock was about. */
  readonly resources: readonly string[];
  /** For `LOCK_CONTENDED`: suggested wait before retrying, in whole seconds (≥ 1). */
  readonly retryAfter?: number;
}

type ExceptionClass = new (error: object) => Error;

/*
 * @nestjs/microservices and @nestjs/websockets are optional: they are loaded only when a handler
 * of that transport fails, and an application using that transport has them installed.
 */

/** Creates the `RpcException` (from @nestjs/microservices) for a lock failure on a microservice handler. */
export function createRpcLockException(payload: LockErrorPayload): Error {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { RpcException } = require('@nestjs/microservices') as { RpcException: ExceptionClass };
  return new RpcException({ ...payload });
}

/** Creates the `WsException` (from @nestjs/websockets) for a lock failure on a WebSocket gateway handler. */
export function createWsLockException(payload: LockErrorPayload): Error {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { WsException } = require('@nestjs/websockets') as { WsException: ExceptionClass };
  return new WsException({ ...payload });
}
