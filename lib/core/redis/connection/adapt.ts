import type { Cluster, Redis } from 'ioredis';
import type { RedlockClient } from '../../base/client-types';
import type { Connection } from './connection';
import { IoredisConnection } from './ioredis';
import { NodeRedisConnection } from './node-redis';

/**
 * What a value passed as a client is, told by its members (duck-typed, so another copy of a
 * library works too): an ioredis or iovalkey client (`evalsha`, `status`), a node-redis client
 * (`sendCommand`, `isOpen`, `duplicate`) or a node-redis Cluster client (also `nodeClient`).
 * A node-redis client pool, legacy-mode client or Sentinel client is named, to be refused with
 * the reason.
 */
export type ClientShape =
  | 'ioredis'
  | 'node-redis'
  | 'node-redis-cluster'
  | 'node-redis-pool'
  | 'node-redis-legacy'
  | 'node-redis-sentinel'
  | undefined;

/** See {@link ClientShape}. */
export function clientShape(value: unknown): ClientShape {
  if (typeof value !== 'object' || value === null) return undefined;
  const v = value as Record<string, unknown>;
  const fn = (name: string): boolean => typeof v[name] === 'function';
  if (fn('evalsha') && fn('on') && typeof v.status === 'string') return 'ioredis';
  if (fn('sendCommand') && typeof v.isOpen === 'boolean') {
    if (fn('nodeClient')) return 'node-redis-cluster';
    if (fn('getMasterNode')) return 'node-redis-sentinel';
    if (fn('execute') && !fn('duplicate')) return 'node-redis-pool';
    if (fn('duplicate') && fn('connect')) return 'node-redis';
  }
  // client.legacy(): callback commands, no `isOpen`.
  if (fn('sendCommand') && fn('multi') && fn('quit') && v.isOpen === undefined) {
    return 'node-redis-legacy';
  }
  return undefined;
}

/** Why a client of shape `shape` is refused, or `undefined` when the engine takes it. */
export function refusedShape(shape: ClientShape): string | undefined {
  if (shape === 'node-redis-pool') {
    return 'a node-redis client pool, which the engine cannot use (its scripts, pub/sub and connection checks need one connection per master): pass a client from createClient()';
  }
  if (shape === 'node-redis-sentinel') {
    return 'a node-redis Sentinel client, which the engine does not take: pass a client of each master (createClient()), or ioredis options with `sentinels`';
  }
  if (shape === 'node-redis-legacy') {
    return 'a node-redis legacy-mode client: pass the client itself, not client.legacy()';
  }
  return undefined;
}

/** Whether the engine takes `value` as a client (see {@link clientShape}). */
export function isRedlockClient(value: unknown): value is RedlockClient {
  const shape = clientShape(value);
  return shape !== undefined && refusedShape(shape) === undefined;
}

const connections = new WeakMap<object, Connection>();

/**
 * The {@link Connection} of a client, made on first use and shared by every engine over it (one
 * set of listeners per client).
 */
export function connectionOf(client: RedlockClient): Connection {
  let connection = connections.get(client);
  if (!connection) {
    const shape = clientShape(client);
    connection =
      shape === 'node-redis' || shape === 'node-redis-cluster'
        ? new NodeRedisConnection(client, shape === 'node-redis-cluster')
        : new IoredisConnection(client as Redis | Cluster);
    connections.set(client, connection);
  }
  return connection;
}
