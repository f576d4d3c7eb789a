import { configValue, timeMs } from './replies';
import { clientSecrets } from '../../base/redact';
import type { Connection, ConnectionEvent, Subscriber, SubscriberHandlers } from './connection';

/** The members of a node-redis client or Cluster client the adapter uses (5 and newer). */
interface NodeRedisLike {
  readonly isOpen: boolean;
  readonly isReady?: boolean;
  readonly options?: unknown;
  sendCommand(...args: unknown[]): Promise<unknown>;
  duplicate(overrides?: object): NodeRedisLike;
  connect(): Promise<unknown>;
  subscribe(
    channels: string[],
    listener: (message: string, channel: string) => void,
  ): Promise<void>;
  unsubscribe(
    channels: string[],
    listener: (message: string, channel: string) => void,
  ): Promise<void>;
  close?(): Promise<void>;
  quit?(): Promise<unknown>;
  destroy(): void;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  off(event: string, listener: (...args: unknown[]) => void): unknown;
  listenerCount(event: string): number;
}

/**
 * The {@link Connection} of a node-redis client or Cluster client (`redis` 5 and newer; RESP2
 * or RESP3). node-redis writes the commands issued until its `setImmediate` runs in one write by
 * itself, so nothing is corked; its pub/sub connection is a `duplicate()`, which re-subscribes by itself before it is
 * ready again after a lost connection.
 *
 * Events: node-redis tells a lost connection by `reconnecting` (right after the `error`), and a
 * closed client by `end`; both are the seam's `close`.
 */
export class NodeRedisConnection implements Connection {
  readonly library = 'node-redis';
  readonly address: string;
  readonly secrets: readonly string[];
  private readonly client: NodeRedisLike;

  constructor(
    client: object,
    readonly cluster: boolean,
  ) {
    this.client = client as NodeRedisLike;
    this.address = addressOf(this.client, cluster);
    this.secrets = nodeRedisSecrets(this.client);
  }

  get isReady(): boolean {
    // A Cluster client of node-redis 5 has no `isReady`.
    return this.cluster ? this.client.isOpen : this.client.isReady === true;
  }

  /** One command; on a Cluster, sent to the node of `firstKey`'s slot (any node without one). */
  private send(args: readonly (string | Buffer)[], firstKey?: string): Promise<unknown> {
    return this.cluster
      ? this.client.sendCommand(firstKey, false, args)
      : this.client.sendCommand(args);
  }

  evalsha(
    sha: string,
    keys: readonly string[],
    args: readonly (string | Buffer)[],
  ): Promise<unknown> {
    return this.script('EVALSHA', sha, keys, args);
  }

  eval(
    source: string,
    keys: readonly string[],
    args: readonly (string | Buffer)[],
  ): Promise<unknown> {
    return this.script('EVAL', source, keys, args);
  }

  private script(
    command: 'EVALSHA' | 'EVAL',
    script: string,
    keys: readonly string[],
    args: readonly (string | Buffer)[],
  ): Promise<unknown> {
    const sent = this.send([command, script, String(keys.length), ...keys, ...args], keys[0]);
    return sent.then(scriptReply);
  }

  scriptLoad(source: string): Promise<unknown> {
    return this.send(['SCRIPT', 'LOAD', source]);
  }

  ping(): Promise<unknown> {
    return this.send(['PING']);
  }

  time(): Promise<number> {
    return this.send(['TIME']).then(timeMs);
  }

  async info(section: string): Promise<string> {
    return String(await this.send(['INFO', section]));
  }

  async configGet(name: string): Promise<string | undefined> {
    return configValue(await this.send(['CONFIG', 'GET', name]), name);
  }

  async hmget(key: string, fields: readonly string[]): Promise<(string | null)[]> {
    const reply = (await this.send(['HMGET', key, ...fields], key)) as unknown[];
    return reply.map((v) => (v === null || v === undefined ? null : String(v)));
  }

  corkable(): undefined {
    return undefined;
  }

  /** The wrappers of each `close` listener (one per {@link on} call, as an emitter keeps them). */
  private readonly mapped = new Map<(err?: unknown) => void, (() => void)[]>();

  on(event: ConnectionEvent, listener: (err?: unknown) => void): void {
    if (event !== 'close') {
      this.client.on(event, listener as (...args: unknown[]) => void);
      return;
    }
    const closed = (): void => listener();
    this.mapped.set(listener, [...(this.mapped.get(listener) ?? []), closed]);
    this.client.on('reconnecting', closed);
    this.client.on('end', closed);
  }

  off(event: ConnectionEvent, listener: (err?: unknown) => void): void {
    if (event !== 'close') {
      this.client.off(event, listener as (...args: unknown[]) => void);
      return;
    }
    const wrappers = this.mapped.get(listener);
    const closed = wrappers?.pop();
    if (!closed) return;
    if (wrappers?.length === 0) this.mapped.delete(listener);
    this.client.off('reconnecting', closed);
    this.client.off('end', closed);
  }

  errorListeners(): number {
    return this.client.listenerCount('error');
  }

  subscriber(handlers: SubscriberHandlers): Subscriber {
    // SUBSCRIBE may be sent while the new connection is still being made.
    const sub = this.client.duplicate(this.cluster ? {} : { disableOfflineQueue: false });
    const listener = (message: string, channel: string): void => handlers.message(channel, message);
    sub.on('error', (err) => handlers.error(err));
    let connected = false;
    sub.on('ready', () => {
      if (connected) handlers.reconnected();
      connected = true;
    });
    const opened = sub.connect().then(
      () => true,
      (err: unknown) => {
        handlers.error(err);
        return false;
      },
    );
    return {
      subscribe: async (channels) => {
        if (!(await opened)) throw new Error('subscriber connection failed');
        return sub.subscribe([...channels], listener);
      },
      unsubscribe: async (channels) => {
        if (!(await opened) || !sub.isOpen) return undefined;
        return sub.unsubscribe([...channels], listener);
      },
      close: (ms) => closeWithin(sub, opened, ms),
    };
  }
}

/**
 * A script's reply as the engine's decoders read it (redis/kinds/kind.ts): RESP3 gives the
 * same shapes for what Lua returns (integers, strings, arrays, nil), so only a `Buffer` (a
 * client with a type mapping to buffers) is turned into a string.
 */
function scriptReply(value: unknown): unknown {
  // The usual reply has no Buffer: returned as it is, not copied.
  return hasBuffer(value) ? asStrings(value) : value;
}

function hasBuffer(value: unknown): boolean {
  return Buffer.isBuffer(value) || (Array.isArray(value) && value.some(hasBuffer));
}

function asStrings(value: unknown): unknown {
  if (Buffer.isBuffer(value)) return value.toString();
  return Array.isArray(value) ? value.map(asStrings) : value;
}

/** `host:port` of a node-redis client from its options, never credentials. */
function addressOf(client: NodeRedisLike, cluster: boolean): string {
  const o = (client.options ?? {}) as {
    url?: unknown;
    socket?: { host?: unknown; port?: unknown; path?: unknown };
    database?: unknown;
    rootNodes?: { url?: unknown; socket?: { host?: unknown; port?: unknown } }[];
  };
  if (cluster) {
    const root = o.rootNodes?.[0];
    const at = root ? hostPort(root.url, root.socket) : undefined;
    return at ? `cluster(${at})` : 'cluster';
  }
  if (typeof o.socket?.path === 'string') return `unix:${o.socket.path}`;
  const db = typeof o.database === 'number' && o.database > 0 ? `/${o.database}` : '';
  return `${hostPort(o.url, o.socket) ?? 'localhost:6379'}${db}`;
}

function hostPort(
  url: unknown,
  socket: { host?: unknown; port?: unknown } | undefined,
): string | undefined {
  if (typeof socket?.host === 'string' || typeof socket?.port === 'number') {
    return `${String(socket.host ?? 'localhost')}:${String(socket.port ?? 6379)}`;
  }
  if (typeof url !== 'string') return undefined;
  // The host is whatever follows the last `@` (the password may hold any character).
  const at = /^[a-z]+:\/\/(?:.*@)?([^/?#@]*)/i.exec(url)?.[1];
  if (!at) return undefined;
  return /:\d+$/.test(at) ? at : `${at}:6379`;
}

/** Passwords in a node-redis client's options: its own, its URL's, its Cluster nodes'. */
function nodeRedisSecrets(client: NodeRedisLike): string[] {
  const o = (client.options ?? {}) as {
    defaults?: unknown;
    rootNodes?: unknown[];
  };
  const all = [o, o.defaults, ...(Array.isArray(o.rootNodes) ? o.rootNodes : [])];
  return all.flatMap((options) => (options ? clientSecrets({ options }) : []));
}

/** `close()` (or `quit()` before 5.x had it) within `ms`, then `destroy()`; never rejects. */
async function closeWithin(
  sub: NodeRedisLike,
  opened: Promise<boolean>,
  ms: number,
): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const polite = opened.then((open) => {
    if (!open || !sub.isOpen) return undefined;
    return (sub.close ? sub.close() : sub.quit?.())?.catch(() => undefined);
  });
  await Promise.race([
    polite,
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
    }),
  ]);
  clearTimeout(timer);
  if (sub.isOpen) {
    try {
      sub.destroy();
    } catch {
      // already closed
    }
  }
}
