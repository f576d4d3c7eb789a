import type { Cluster, Redis } from 'ioredis';

/**
 * A node-redis client (`createClient()` of the `redis` package, 5 or newer), described by the
 * members the engine uses, so that the package's own types are not needed to compile against
 * this one. Pass it connected (`await client.connect()`); the engine never closes it.
 */
export interface NodeRedisClient {
  /** Whether the client was opened with `connect()` and not closed since. */
  readonly isOpen: boolean;
  /** Whether commands are sent now. */
  readonly isReady: boolean;
  /** Sends one command (the engine's scripts, INFO, CONFIG GET, PING). */
  sendCommand(args: readonly string[]): Promise<unknown>;
  /** A new client with the same options (the engine's pub/sub connection). */
  duplicate(): unknown;
}

/**
 * A node-redis Cluster client (`createCluster()` of the `redis` package, 5 or newer), described
 * by the members the engine uses. Pass it connected; the engine never closes it.
 */
export interface NodeRedisCluster {
  /** Whether the client was opened with `connect()` and not closed since. */
  readonly isOpen: boolean;
  /** Sends one command to the node that serves `firstKey`'s slot. */
  sendCommand(
    firstKey: string | undefined,
    isReadonly: boolean | undefined,
    args: string[],
  ): Promise<unknown>;
  /** A new Cluster client with the same options (the engine's pub/sub connection). */
  duplicate(): unknown;
}

/**
 * An iovalkey `Redis` or `Cluster` instance (0.4; a fork of ioredis with the same interface),
 * described by members the engine uses, so that the package's own types are not needed to
 * compile against this one. The engine never closes it.
 */
export interface IovalkeyClient {
  /** The connection's state (`ready` once commands are sent). */
  readonly status: string;
  /** EVALSHA (the engine's scripts). */
  evalsha(sha: string, numKeys: number, ...keysAndArgs: (string | Buffer)[]): Promise<unknown>;
  /** A new client with the same options (the engine's pub/sub connection). */
  duplicate(...overrides: never[]): unknown;
}

/**
 * A Redis master as the engine sees it: an ioredis or iovalkey `Redis` or `Cluster` instance, or
 * a node-redis client or Cluster client. docs/clients.md tells what each brings.
 */
export type RedlockClient = Redis | Cluster | IovalkeyClient | NodeRedisClient | NodeRedisCluster;
