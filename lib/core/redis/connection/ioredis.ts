import type { Writable } from 'node:stream';
import type { Cluster, Redis } from 'ioredis';
import { configValue, timeMs } from './replies';
import { clientSecrets } from '../../base/redact';
import type { Connection, ConnectionEvent, Subscriber, SubscriberHandlers } from './connection';

/** A script command of ioredis called with its keys and arguments as arrays (flattened by it). */
type FlatCall = (
  this: Redis | Cluster,
  script: string,
  keyCount: number,
  keys: readonly string[],
  args: readonly (string | Buffer)[],
) => Promise<unknown>;

/**
 * The {@link Connection} of an ioredis `Redis` or `Cluster` (5 or 6), and of an iovalkey one (a
 * fork of ioredis with the same interface). ioredis writes each command itself, so the engine
 * corks a standalone client's socket to send one tick's commands in one write.
 */
export class IoredisConnection implements Connection {
  readonly library = 'ioredis';
  readonly cluster: boolean;
  readonly address: string;
  readonly secrets: readonly string[];

  constructor(private readonly client: Redis | Cluster) {
    this.cluster = (client as { isCluster?: boolean }).isCluster === true;
    this.address = addressOf(client, this.cluster);
    this.secrets = clientSecrets(client);
  }

  get isReady(): boolean {
    return this.client.status === 'ready';
  }

  evalsha(
    sha: string,
    keys: readonly string[],
    args: readonly (string | Buffer)[],
  ): Promise<unknown> {
    return this.script('evalsha', sha, keys, args);
  }

  eval(
    source: string,
    keys: readonly string[],
    args: readonly (string | Buffer)[],
  ): Promise<unknown> {
    return this.script('eval', source, keys, args);
  }

  /**
   * EVALSHA or EVAL with the keys and arguments as two arrays, not spread: ioredis (5 and 6) and
   * iovalkey flatten a command's arguments once anyway (`args.flat()`), so a spread would only
   * copy them twice.
   */
  private script(
    command: 'evalsha' | 'eval',
    script: string,
    keys: readonly string[],
    args: readonly (string | Buffer)[],
  ): Promise<unknown> {
    const call = this.client[command] as unknown as FlatCall;
    return call.call(this.client, script, keys.length, keys, args);
  }

  scriptLoad(source: string): Promise<unknown> {
    return this.client.script('LOAD', source);
  }

  ping(): Promise<unknown> {
    return this.client.ping();
  }

  time(): Promise<number> {
    return this.client.time().then(timeMs);
  }

  info(section: string): Promise<string> {
    return this.client.info(section);
  }

  async configGet(name: string): Promise<string | undefined> {
    return configValue(await this.client.config('GET', name), name);
  }

  hmget(key: string, fields: readonly string[]): Promise<(string | null)[]> {
    return this.client.hmget(key, ...fields);
  }

  corkable(): Writable | undefined {
    if (this.cluster || this.client.status !== 'ready') return undefined;
    const stream = (this.client as Redis).stream as Writable | undefined;
    return stream && typeof stream.cork === 'function' && stream.writable ? stream : undefined;
  }

  on(event: ConnectionEvent, listener: (err?: unknown) => void): void {
    this.client.on(event, listener);
  }

  off(event: ConnectionEvent, listener: (err?: unknown) => void): void {
    this.client.off(event, listener);
  }

  errorListeners(): number {
    return this.client.listenerCount('error');
  }

  /**
   * A duplicate of the client, connected at once. A Cluster master gets a Cluster client of its
   * own: a PUBLISH reaches every node of a Cluster, so it hears the releases of every slot
   * (ioredis subscribes on one node and moves on a failover) and re-subscribes by itself. A
   * standalone duplicate does not (`autoResubscribe: false`): ioredis' own re-subscription is a
   * promise nobody waits for, rejected ("Connection is closed.") when the engine closes while
   * the connection is being made again — an unhandled rejection, which ends a Node process by
   * default; the owner re-subscribes on {@link SubscriberHandlers.reconnected} instead.
   */
  subscriber(handlers: SubscriberHandlers): Subscriber {
    const sub: Redis | Cluster = this.cluster
      ? (this.client as Cluster).duplicate([], {
          lazyConnect: false,
          enableOfflineQueue: true,
          redisOptions: {
            // (Once per subscriber connection, and the user's options: see base/fields.ts.)
            // eslint-disable-next-line no-restricted-syntax
            ...(this.client as Cluster).options.redisOptions,
            maxRetriesPerRequest: null,
          },
        })
      : (this.client as Redis).duplicate({
          lazyConnect: false,
          // SUBSCRIBE may be sent while the new connection is still being made.
          enableOfflineQueue: true,
          maxRetriesPerRequest: null,
          autoResubscribe: false,
        });
    sub.on('error', (err: unknown) => handlers.error(err));
    sub.on('message', (channel: string, message: string) => handlers.message(channel, message));
    let connected = false;
    sub.on('ready', () => {
      if (connected) handlers.reconnected();
      connected = true;
    });
    return {
      subscribe: (channels) => sub.subscribe(...channels),
      unsubscribe: (channels) => sub.unsubscribe(...channels),
      close: (ms) => quitWithin(sub, ms),
    };
  }
}

/** `host:port` of a client (or `unix:path`, `cluster(host:port, n masters)`), never credentials. */
function addressOf(client: Redis | Cluster, cluster: boolean): string {
  if (cluster) {
    const nodes = (client as Cluster).nodes('master');
    const first = nodes[0]?.options;
    return first
      ? `cluster(${first.host ?? '?'}:${first.port ?? '?'}, ${nodes.length} masters)`
      : 'cluster';
  }
  const o = (client as Redis).options;
  if (o.path) return `unix:${o.path}`;
  return `${o.host ?? 'localhost'}:${o.port ?? 6379}${o.db ? `/${o.db}` : ''}`;
}

/** QUIT, answered within `ms` or followed by a disconnect; never rejects. */
function quitWithin(sub: Redis | Cluster, ms: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      sub.disconnect();
      resolve();
    }, ms);
    sub.quit().then(
      () => {
        clearTimeout(timer);
        resolve();
      },
      () => {
        clearTimeout(timer);
        sub.disconnect();
        resolve();
      },
    );
  });
}
