import type { ArgumentsHost } from '@nestjs/common';
import { importOptional } from '../optional-peer';

/** Error codes sent to RPC and WebSocket clients (and GraphQL clients as `extensions.code`). */
export type LockErrorCode =
  | 'LOCK_CONTENDED'
  | 'NO_QUORUM'
  | 'LOCK_LOST'
  | 'SHUTTING_DOWN'
  | 'INVALID_ARGUMENT'
  | 'KIND_MISMATCH';

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
 * @nestjs/microservices and @nestjs/websockets are optional (and ESM-only from Nest 12 on): they
 * are imported once, when the module starts ({@link loadTransportExceptions}); an application
 * that uses a transport has its package installed.
 */
let rpcException: ExceptionClass | undefined;
let wsException: ExceptionClass | undefined;
let rpcFilter: TransportFilterClass | undefined;
let wsFilter: TransportFilterClass | undefined;
let loading: Promise<void> | undefined;

/** A transport's base exception filter (`BaseRpcExceptionFilter`, `BaseWsExceptionFilter`). */
interface TransportFilter {
  catch(exception: unknown, host: ArgumentsHost): unknown;
}
type TransportFilterClass = new () => TransportFilter;

/**
 * Loads `RpcException`, `WsException` and their base filters where the packages are installed.
 * Idempotent; the module awaits it when it starts.
 */
export function loadTransportExceptions(): Promise<void> {
  return (loading ??= (async () => {
    const [rpc, ws] = await Promise.all([
      importOptional<{
        RpcException?: ExceptionClass;
        BaseRpcExceptionFilter?: TransportFilterClass;
      }>('@nestjs/microservices'),
      importOptional<{
        WsException?: ExceptionClass;
        BaseWsExceptionFilter?: TransportFilterClass;
      }>('@nestjs/websockets'),
    ]);
    rpcException = rpc?.RpcException;
    rpcFilter = rpc?.BaseRpcExceptionFilter;
    wsException = ws?.WsException;
    wsFilter = ws?.BaseWsExceptionFilter;
  })());
}

/**
 * Answers a lock failure on an RPC or WebSocket context the way the transport answers its own
 * `RpcException` / `WsException` (through its base exception filter): RPC returns the error
 * Observable, WebSocket emits an `exception` event to the client.
 */
export function answerTransportLockError(
  type: 'rpc' | 'ws',
  payload: LockErrorPayload,
  host: ArgumentsHost,
): unknown {
  const exception =
    type === 'rpc' ? createRpcLockException(payload) : createWsLockException(payload);
  const Filter = type === 'rpc' ? rpcFilter : wsFilter;
  return Filter ? new Filter().catch(exception, host) : undefined;
}

/**
 * A plain error carrying the payload, for the case where the transport's package could not be
 * loaded (it is then not the transport in use; kept so that mapping never throws).
 */
function plainLockError(payload: LockErrorPayload): Error {
  return Object.assign(new Error(payload.message), { error: { ...payload } });
}

/** Creates the `RpcException` (from @nestjs/microservices) for a lock failure on a microservice handler. */
export function createRpcLockException(payload: LockErrorPayload): Error {
  return rpcException ? new rpcException({ ...payload }) : plainLockError(payload);
}

/** Creates the `WsException` (from @nestjs/websockets) for a lock failure on a WebSocket gateway handler. */
export function createWsLockException(payload: LockErrorPayload): Error {
  return wsException ? new wsException({ ...payload }) : plainLockError(payload);
}
