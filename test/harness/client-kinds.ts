/**
 * Clients of every library the engine takes (lib/core/redis/connection/), made alike for the shared
 * client suite (test/clients/client-suite.ts): connected, failing fast while a master is down (no
 * offline queue, no per-request retries), reconnecting every 50 ms, errors swallowed (the tests
 * read them from the votes), and closed without leaving a socket or timer behind.
 */
import IoRedis, { Cluster as IoCluster } from 'ioredis';
import type { Redis as IoRedisClient } from 'ioredis';
import IoValkey, { Cluster as ValkeyCluster } from 'iovalkey';
import { createClient, createCluster } from 'redis';
import { createClient as createClient5, createCluster as createCluster5 } from 'redis5';
import { closeClient } from './redis-masters';

/** One client library (and protocol) of the shared suite. */
export interface ClientKind {
  readonly name: 'ioredis' | 'iovalkey' | 'node-redis' | 'node-redis-resp2' | 'node-redis5';
}

/** Every kind the shared suite runs on. */
export const CLIENT_KINDS: readonly ClientKind[] = [
  { name: 'ioredis' },
  { name: 'iovalkey' },
  { name: 'node-redis' },
  { name: 'node-redis-resp2' },
  { name: 'node-redis5' },
];

/** The kind named `name`. */
export function kindNamed(name: ClientKind['name']): ClientKind {
  const kind = CLIENT_KINDS.find((k) => k.name === name);
  if (!kind) throw new Error(`no client kind ${name}`);
  return kind;
}

/** Clients made by {@link makeClients}, and how to close them. */
export interface MadeClients {
  readonly clients: unknown[];
  close(): Promise<void>;
}

/** What node-redis clients of both majors have in common here. */
interface NodeRedisLike {
  readonly isOpen: boolean;
  on(event: 'error', listener: (err: unknown) => void): unknown;
  connect(): Promise<unknown>;
  close?(): Promise<void>;
  quit?(): Promise<unknown>;
  destroy(): void;
}

/** Options every kind gets; `password` for the tests of secrets. */
export interface KindOptions {
  password?: string;
}

/** One connected client of `kind` per port on 127.0.0.1. */
export async function makeClients(
  kind: ClientKind,
  ports: readonly number[],
  options: KindOptions = {},
): Promise<MadeClients> {
  if (kind.name === 'ioredis' || kind.name === 'iovalkey') {
    const Ctor = kind.name === 'ioredis' ? IoRedis : (IoValkey as unknown as typeof IoRedis);
    const clients = ports.map((port) => {
      const c = new Ctor({
        host: '127.0.0.1',
        port,
        enableOfflineQueue: false,
        maxRetriesPerRequest: 0,
        retryStrategy: () => 50,
        disconnectTimeout: 100,
        ...(options.password ? { password: options.password } : {}),
      });
      c.on('error', () => undefined);
      return c;
    });
    // A wrong password never gets ready: the client keeps trying (and failing) in the background.
    if (!options.password) await waitFor(() => clients.every((c) => c.status === 'ready'));
    return {
      clients,
      close: () =>
        Promise.all(clients.map((c) => closeClient(c as IoRedisClient))).then(() => undefined),
    };
  }
  const create = (kind.name === 'node-redis5' ? createClient5 : createClient) as (
    o: object,
  ) => NodeRedisLike;
  const clients = ports.map((port) => {
    const c = create({
      socket: { host: '127.0.0.1', port, reconnectStrategy: () => 50, connectTimeout: 1000 },
      disableOfflineQueue: true,
      ...(kind.name === 'node-redis-resp2' ? { RESP: 2 } : {}),
      ...(options.password ? { password: options.password } : {}),
    });
    c.on('error', () => undefined);
    return c;
  });
  // A wrong password never connects: the client keeps trying (and failing) in the background.
  const connecting = clients.map((c) => c.connect().catch(() => undefined));
  if (!options.password) await Promise.all(connecting);
  return { clients, close: () => Promise.all(clients.map(closeNodeRedis)).then(() => undefined) };
}

/** A client of `kind` for a one-node Redis Cluster whose node listens on `port`. */
export async function makeClusterClient(
  kind: ClientKind,
  port: number,
): Promise<{ client: unknown; close(): Promise<void> }> {
  if (kind.name === 'ioredis' || kind.name === 'iovalkey') {
    const Ctor =
      kind.name === 'ioredis' ? IoCluster : (ValkeyCluster as unknown as typeof IoCluster);
    const client = new Ctor([{ host: '127.0.0.1', port }], {
      enableOfflineQueue: false,
      redisOptions: { maxRetriesPerRequest: 0, disconnectTimeout: 100 },
    });
    client.on('error', () => undefined);
    await waitFor(() => client.status === 'ready');
    return {
      client,
      close: async () => {
        await client.quit().catch(() => client.disconnect());
      },
    };
  }
  const create = (kind.name === 'node-redis5' ? createCluster5 : createCluster) as (
    o: object,
  ) => NodeRedisLike;
  const client = create({
    rootNodes: [{ socket: { host: '127.0.0.1', port } }],
    defaults: { socket: { reconnectStrategy: () => 50 } },
    ...(kind.name === 'node-redis-resp2' ? { RESP: 2 } : {}),
  });
  client.on('error', () => undefined);
  await client.connect();
  return { client, close: () => closeNodeRedis(client) };
}

async function closeNodeRedis(c: NodeRedisLike): Promise<void> {
  if (!c.isOpen) return;
  try {
    await Promise.race([
      c.close ? c.close() : c.quit?.(),
      new Promise((resolve) => setTimeout(resolve, 1000).unref()),
    ]);
  } catch {
    // closed meanwhile
  }
  if (c.isOpen) c.destroy();
}

async function waitFor(done: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error('clients not ready');
    await new Promise((r) => setTimeout(r, 10));
  }
}
