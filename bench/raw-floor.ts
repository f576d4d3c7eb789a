/**
 * The "raw floor": the least a Redlock client can do per lock, as a reference for the others.
 *
 * Acquire = `SET key token NX PX ttl` sent to every master in parallel, granted as soon as a
 * majority answered OK (a failed attempt deletes what it set). Release = a Lua compare-and-delete
 * sent to every master in parallel, done as soon as a majority answered (the rest land in the
 * background) — the least waiting the algorithm allows. No validity bookkeeping, no drift, no
 * per-node timeouts, no fencing, no restart quarantine, no lock objects: it is NOT a safe lock
 * client, only the cost of the Redis round trips themselves as seen from Node with ioredis.
 *
 * What one tick sends to a master leaves in one write, as our engine's does
 * (lib/core/redis/masters/node.ts, `MasterNode.coalesce`): a master's first command of a tick is
 * written at once, a second one corks its socket until the end of the tick. One caller sends one
 * command per master and tick, so this changes nothing uncontended; with 64 parallel callers
 * (the replies of many callers read together, their next commands sent together) a floor
 * without it wrote every command in its own syscall and fell behind our engine.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Writable } from 'node:stream';
import type { Redis } from 'ioredis';
import { sleep } from './stats';

/** The raw floor's release: compare-and-delete of one key (KEYS: the key; ARGV: the token). */
export const RELEASE_LUA = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;
const RELEASE_SHA = createHash('sha1').update(RELEASE_LUA).digest('hex');

/** Retry settings of the raw floor (used only when a resource is contended). */
export interface RawRetry {
  retryDelay: number;
  retryJitter: number;
  retryCount: number;
}

/** Minimal parallel SET NX PX + compare-and-delete over N masters. */
export class RawFloor {
  protected readonly quorum: number;
  /** Per master: whether it got a command in the current tick. */
  private readonly inTick: boolean[];
  /** The sockets corked in the current tick. */
  private readonly corked: Writable[] = [];
  private tickEnding = false;

  constructor(
    protected readonly clients: readonly Redis[],
    protected readonly ttl: number,
    private readonly retry: RawRetry,
  ) {
    this.quorum = Math.floor(clients.length / 2) + 1;
    this.inTick = clients.map(() => false);
  }

  /**
   * Call before sending a command to master `i` (see the file comment): its first command of the
   * tick goes out at once, a further one corks its socket until the tick ends.
   */
  protected coalesce(i: number): void {
    if (!this.inTick[i]) {
      this.inTick[i] = true;
      if (!this.tickEnding) {
        this.tickEnding = true;
        process.nextTick(() => this.endTick());
      }
      return;
    }
    const client = this.clients[i];
    const stream = client.stream as Writable | undefined;
    if (client.status !== 'ready' || !stream || stream.writableCorked > 0) return;
    stream.cork();
    this.corked.push(stream);
  }

  private endTick(): void {
    this.tickEnding = false;
    this.inTick.fill(false);
    for (const stream of this.corked.splice(0)) stream.uncork();
  }

  /** Loads the release script on every master, so that EVALSHA never misses. */
  async init(): Promise<void> {
    await Promise.all(this.clients.map((c) => c.script('LOAD', RELEASE_LUA)));
  }

  /** One attempt: the token when a majority granted the key, otherwise `null`. */
  async tryLock(key: string): Promise<string | null> {
    const token = randomBytes(16).toString('hex');
    const granted = await this.majority(
      this.clients.map((c, i) => {
        this.coalesce(i);
        return c.set(key, token, 'PX', this.ttl, 'NX');
      }),
      (r) => r === 'OK',
    );
    if (granted) return token;
    await this.unlock(key, token);
    return null;
  }

  /** Attempts until granted, sleeping `retryDelay ± retryJitter` between attempts. */
  async lock(key: string): Promise<string> {
    for (let attempt = 0; attempt <= this.retry.retryCount; attempt++) {
      const token = await this.tryLock(key);
      if (token) return token;
      await sleep(
        Math.max(0, this.retry.retryDelay + (Math.random() * 2 - 1) * this.retry.retryJitter),
      );
    }
    throw new Error(`raw floor: ${key} still held after ${this.retry.retryCount} retries`);
  }

  /** Compare-and-delete on every master; resolves once a majority answered. */
  async unlock(key: string, token: string): Promise<void> {
    await this.majority(
      this.clients.map((c, i) => {
        this.coalesce(i);
        return c.evalsha(RELEASE_SHA, 1, key, token);
      }),
      () => true,
    );
  }

  /** Resolves `true` once `quorum` replies pass `ok`, `false` once that cannot happen. */
  protected majority<T>(requests: Promise<T>[], ok: (reply: T) => boolean): Promise<boolean> {
    return new Promise((resolve) => {
      let yes = 0;
      let no = 0;
      const n = requests.length;
      const vote = (passed: boolean): void => {
        if (passed) yes++;
        else no++;
        if (yes >= this.quorum) resolve(true);
        else if (n - no < this.quorum) resolve(false);
      };
      for (const r of requests)
        r.then(
          (v) => vote(ok(v)),
          () => vote(false),
        );
    });
  }
}
