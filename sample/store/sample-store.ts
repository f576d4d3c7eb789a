import Redis from 'ioredis';

/**
 * The sample's tiny data layer: JSON documents and append-only lists. Deliberately *not* atomic:
 * every update is a read, some work, then a write — exactly the read-modify-write that loses
 * updates when two requests interleave, and that the locks in this app protect.
 */
export abstract class SampleStore {
  /** The document at `key`, or `undefined`. */
  abstract get<T>(key: string): Promise<T | undefined>;
  /** Writes the document at `key`. */
  abstract set<T>(key: string, value: T): Promise<void>;
  /** Keys that start with `prefix`. */
  abstract keys(prefix: string): Promise<string[]>;
  /** Appends `value` to the list at `key`. */
  abstract push(key: string, value: string): Promise<void>;
  /** The whole list at `key`. */
  abstract list(key: string): Promise<string[]>;
  /** Closes connections. */
  abstract close(): Promise<void>;

  /** Nest lifecycle hook: the store closes with the application. */
  onApplicationShutdown(): Promise<void> {
    return this.close();
  }
}

/** A {@link SampleStore} in a Redis database (shared by every instance of the app). */
export class RedisSampleStore extends SampleStore {
  private readonly redis: Redis;

  /** @param url `redis://host:port[/db]` of the data store (not necessarily a lock master). */
  constructor(url: string) {
    super();
    this.redis = new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: false });
    this.redis.on('error', () => undefined); // reported by the failing commands
  }

  async get<T>(key: string): Promise<T | undefined> {
    const raw = await this.redis.get(key);
    return raw === null ? undefined : (JSON.parse(raw) as T);
  }

  async set<T>(key: string, value: T): Promise<void> {
    await this.redis.set(key, JSON.stringify(value));
  }

  async keys(prefix: string): Promise<string[]> {
    const found: string[] = [];
    let cursor = '0';
    do {
      const [next, batch] = await this.redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
      cursor = next;
      found.push(...batch);
    } while (cursor !== '0');
    return found;
  }

  async push(key: string, value: string): Promise<void> {
    await this.redis.rpush(key, value);
  }

  async list(key: string): Promise<string[]> {
    return this.redis.lrange(key, 0, -1);
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}

/** A {@link SampleStore} in process memory (one instance only; for tests without Redis). */
export class MemorySampleStore extends SampleStore {
  private readonly docs = new Map<string, string>();
  private readonly lists = new Map<string, string[]>();

  async get<T>(key: string): Promise<T | undefined> {
    await Promise.resolve(); // a real store answers asynchronously: keep the race window
    const raw = this.docs.get(key);
    return raw === undefined ? undefined : (JSON.parse(raw) as T);
  }

  async set<T>(key: string, value: T): Promise<void> {
    await Promise.resolve();
    this.docs.set(key, JSON.stringify(value));
  }

  async keys(prefix: string): Promise<string[]> {
    return [...this.docs.keys(), ...this.lists.keys()].filter((k) => k.startsWith(prefix));
  }

  async push(key: string, value: string): Promise<void> {
    const list = this.lists.get(key) ?? [];
    list.push(value);
    this.lists.set(key, list);
  }

  async list(key: string): Promise<string[]> {
    return [...(this.lists.get(key) ?? [])];
  }

  async close(): Promise<void> {
    this.docs.clear();
    this.lists.clear();
  }
}
