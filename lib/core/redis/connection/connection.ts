import type { Writable } from 'node:stream';

/**
 * The connection seam: everything the engine asks of one Redis master's client. The masters layer
 * (lib/core/redis/masters/), the script calls (redis/scripts/lua.ts) and fencing talk to a client only
 * through it; one adapter per client library implements it (redis/connection/ioredis.ts for ioredis and
 * iovalkey, redis/connection/node-redis.ts for node-redis), and redis/connection/adapt.ts picks the adapter
 * for a client the user passed.
 *
 * Replies come back as the engine's scripts expect them whatever the protocol (RESP2 or RESP3):
 * Lua integers as numbers, Lua strings as strings, tables as arrays, nil as `null`.
 */
export interface Connection {
  /** The client library behind the connection (for messages). */
  readonly library: ClientLibrary;
  /** Whether the client is a Cluster client (keys routed by slot, no boot marker, no corking). */
  readonly cluster: boolean;
  /** Whether commands are sent now: connected, handshake (AUTH, SELECT, HELLO) done. */
  readonly isReady: boolean;
  /** `host:port` (or `unix:path`, `cluster(host:port, n masters)`), never any credential. */
  readonly address: string;
  /** Passwords the client's options hold (removed from every text the engine prints). */
  readonly secrets: readonly string[];

  /** EVALSHA, routed by the first key on a Cluster. Rejects with the server's error. */
  evalsha(
    sha: string,
    keys: readonly string[],
    args: readonly (string | Buffer)[],
  ): Promise<unknown>;
  /** EVAL (the NOSCRIPT fallback of redis/scripts/lua.ts). */
  eval(
    source: string,
    keys: readonly string[],
    args: readonly (string | Buffer)[],
  ): Promise<unknown>;
  /** SCRIPT LOAD on a standalone master (nothing runs). */
  scriptLoad(source: string): Promise<unknown>;
  /** PING. */
  ping(): Promise<unknown>;
  /**
   * TIME: the server's wall clock in ms since the epoch, its microseconds as the fraction
   * (the clock check, redis/masters/clock-watch.ts).
   */
  time(): Promise<number>;
  /** `INFO section`, as the server's text. */
  info(section: string): Promise<string>;
  /** The value of a configuration parameter (`CONFIG GET name`), `undefined` when not set. */
  configGet(name: string): Promise<string | undefined>;
  /** `HMGET key ...fields`: one value or `null` per field. */
  hmget(key: string, fields: readonly string[]): Promise<(string | null)[]>;

  /**
   * The socket to cork while a tick's commands are written (redis/masters/node.ts, write coalescing),
   * when the client writes each command itself; `undefined` when it is not connected, is a
   * Cluster, or batches its writes by itself (node-redis).
   */
  corkable(): Writable | undefined;

  /**
   * Connection events: `ready` after every (re)connect, once commands can be sent; `close` when
   * the connection is lost or closed (before any command goes out on a new one); `error` with
   * each error the client reports.
   */
  on(event: ConnectionEvent, listener: (err?: unknown) => void): void;
  /** Removes a listener added with {@link on}. */
  off(event: ConnectionEvent, listener: (err?: unknown) => void): void;
  /** How many `error` listeners the client has (ours included). */
  errorListeners(): number;

  /** A new connection to the same master for pub/sub, owned (and closed) by the caller. */
  subscriber(handlers: SubscriberHandlers): Subscriber;
}

/** The client libraries the engine takes. */
export type ClientLibrary = 'ioredis' | 'node-redis';

/** The events of a {@link Connection}. */
export type ConnectionEvent = 'ready' | 'close' | 'error';

/** What a {@link Subscriber} tells its owner. */
export interface SubscriberHandlers {
  /** A message published on a subscribed channel. */
  message(channel: string, message: string): void;
  /**
   * The subscriber's connection is ready again after it was lost: the owner subscribes its
   * channels again (a client that re-subscribes by itself makes that harmless) and learns when
   * that is confirmed.
   */
  reconnected(): void;
  /** An error the subscriber's client reported (never thrown). */
  error(err: unknown): void;
}

/** A pub/sub connection to one master (see {@link Connection.subscriber}). */
export interface Subscriber {
  /** SUBSCRIBE; resolves once the server confirmed every channel. */
  subscribe(channels: readonly string[]): Promise<unknown>;
  /** UNSUBSCRIBE. */
  unsubscribe(channels: readonly string[]): Promise<unknown>;
  /** Closes the connection: politely within `ms`, then at once. Never rejects. */
  close(ms: number): Promise<void>;
}
