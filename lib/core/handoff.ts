import type { Redis } from 'ioredis';
import type { MasterNode } from './node';
import { errorMessage, redact } from './node';
import type { RedlockLogger } from './settings';

interface Waiter {
  readonly keys: readonly string[];
  /** When this acquire started waiting; older waiters are woken first (FIFO-ish fairness). */
  readonly since: number;
  wake(): void;
}

/**
 * Fast hand-off: the release script publishes on a channel named like each released key; waiting
 * acquires subscribe through one shared subscriber connection per master and retry as soon as a
 * release is announced, instead of sleeping through it.
 *
 * - Subscriptions are reference-counted per key: a channel is unsubscribed when its last waiter
 *   is done; subscriber connections are closed by {@link close}.
 * - A release is announced by every master; the announcement is de-duplicated by the released
 *   token so that one release wakes one waiter of this process — the one that has waited longest.
 *   The others keep waiting for the next release or their own retry timer (jittered polling
 *   remains the fallback, e.g. when a holder's lock simply expires).
 */
export class ReleaseNotifier {
  private readonly subscribers = new Map<number, Redis>();
  private readonly refs = new Map<string, number>();
  private readonly waiters = new Set<Waiter>();
  /** Recently announced tokens per channel: every master announces each release once. */
  private readonly recent = new Map<string, string[]>();
  private closed = false;

  constructor(
    private readonly nodes: readonly MasterNode[],
    private readonly logger: RedlockLogger,
    private readonly timeout: number,
  ) {}

  /**
   * Subscribes to the keys' release channels (on the standalone masters reachable now).
   * Resolves once the subscriptions are active or failed, with `true` when a channel was newly
   * subscribed (a release may have been missed meanwhile: retry at once); never rejects.
   */
  async subscribe(keys: readonly string[]): Promise<boolean> {
    const fresh = keys.filter((k) => {
      const n = this.refs.get(k) ?? 0;
      this.refs.set(k, n + 1);
      return n === 0;
    });
    if (fresh.length === 0 || this.closed) return false;
    await Promise.all(
      this.nodes.map(async (node) => {
        const sub = this.subscriberFor(node);
        if (!sub) return;
        const reply = await node.request(() => sub.subscribe(...fresh), this.timeout);
        if (reply.kind !== 'reply') {
          this.logger.debug?.(`Redlock: subscribe on ${node.name}: ${reply.kind}`);
        }
      }),
    );
    return true;
  }

  /** Drops one reference to each key; channels without references are unsubscribed. */
  unsubscribe(keys: readonly string[]): void {
    const stale: string[] = [];
    for (const k of keys) {
      const n = (this.refs.get(k) ?? 1) - 1;
      if (n <= 0) {
        this.refs.delete(k);
        this.recent.delete(k);
        stale.push(k);
      } else {
        this.refs.set(k, n);
      }
    }
    if (stale.length === 0) return;
    for (const sub of this.subscribers.values()) {
      sub.unsubscribe(...stale).catch(() => undefined);
    }
  }

  /** Number of channels currently subscribed (for tests and health output). */
  get activeChannels(): number {
    return this.refs.size;
  }

  /**
   * Waits until a release of one of `keys` is announced (and this waiter is the longest-waiting
   * one for it), `ms` elapse, or `signal` aborts. Resolves `true` when woken by a release.
   */
  wait(keys: readonly string[], since: number, ms: number, signal?: AbortSignal): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const finish = (byRelease: boolean): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.waiters.delete(waiter);
        resolve(byRelease);
      };
      const onAbort = (): void => finish(false);
      const waiter: Waiter = { keys, since, wake: () => finish(true) };
      const timer = setTimeout(() => finish(false), Math.max(0, ms));
      if (signal?.aborted) {
        finish(false);
        return;
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.add(waiter);
    });
  }

  /** Closes the subscriber connections. */
  async close(): Promise<void> {
    this.closed = true;
    for (const w of [...this.waiters]) w.wake();
    const subs = [...this.subscribers.values()];
    this.subscribers.clear();
    await Promise.all(subs.map((s) => s.quit().catch(() => s.disconnect())));
  }

  private onMessage = (channel: string, token: string): void => {
    const seen = this.recent.get(channel) ?? [];
    if (seen.includes(token)) return;
    seen.push(token);
    if (seen.length > 8) seen.shift();
    this.recent.set(channel, seen);
    let oldest: Waiter | undefined;
    for (const w of this.waiters) {
      if (w.keys.includes(channel) && (!oldest || w.since < oldest.since)) oldest = w;
    }
    oldest?.wake();
  };

  private subscriberFor(node: MasterNode): Redis | undefined {
    if (node.cluster) return undefined;
    let sub = this.subscribers.get(node.index);
    if (!sub) {
      sub = (node.client as Redis).duplicate({
        lazyConnect: false,
        // SUBSCRIBE may be sent while the new connection is still being made.
        enableOfflineQueue: true,
        maxRetriesPerRequest: null,
      });
      sub.on('error', (err: unknown) =>
        this.logger.debug?.(`Redlock: subscriber of ${node.name}: ${redact(errorMessage(err))}`),
      );
      sub.on('message', this.onMessage);
      this.subscribers.set(node.index, sub);
    }
    return sub;
  }
}
