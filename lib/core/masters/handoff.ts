import type { Redis } from 'ioredis';
import type { MasterNode } from './node';
import { errorMessage } from './node';
import type { RedlockLogger } from '../settings';
import { onAbort } from '../wake';

/** One retrying acquire, registered from its first contended attempt until it ends. */
interface Acquirer {
  readonly keys: readonly string[];
  /** When the acquire started; older acquirers are handed releases first (FIFO-ish fairness). */
  readonly since: number;
  /** Set while the acquirer sleeps between attempts: ends the sleep. */
  wake?: () => void;
  /** A release was handed to it while it was busy with an attempt: its next wait returns at once. */
  handed: boolean;
}

/** An acquire's registration with the {@link ReleaseNotifier}. */
export interface HandoffTicket {
  /**
   * Sleeps until this acquirer is handed a release of one of its keys, `ms` pass, or `signal`
   * aborts. Resolves `true` when handed a release (also one announced during its last attempt).
   */
  wait(ms: number, signal?: AbortSignal): Promise<boolean>;
  /** Ends the registration; channels nobody else listens to are unsubscribed. Idempotent. */
  done(): void;
}

/**
 * Fast hand-off: the release script publishes on a channel named like each released key; waiting
 * acquires subscribe through one shared subscriber connection per master and retry as soon as a
 * release is announced, instead of sleeping through it.
 *
 * - Subscriptions are reference-counted per key: a channel is unsubscribed when its last waiter
 *   is done; subscriber connections are closed by {@link close}.
 * - A release is announced by every master; the announcement is de-duplicated by the released
 *   token so that one release is handed to one acquirer of this process — the one that has
 *   waited longest, whether it sleeps (woken at once) or is busy with an attempt that may have
 *   just missed the release (its next wait returns at once: no missed wake-up). The others keep
 *   waiting for the next release or their own retry timer (jittered polling remains the
 *   fallback, e.g. when a holder's lock simply expires).
 */
export class ReleaseNotifier {
  private readonly subscribers = new Map<number, Redis>();
  private readonly refs = new Map<string, number>();
  private readonly acquirers = new Set<Acquirer>();
  /**
   * Recently announced tokens per channel: every master announces each release once. Only
   * channels with waiters have an entry (dropped with their last waiter), at most 8 tokens each.
   */
  private readonly recent = new Map<string, string[]>();
  private closed = false;

  constructor(
    private readonly nodes: readonly MasterNode[],
    private readonly logger: RedlockLogger,
    private readonly timeout: number,
  ) {}

  /**
   * Registers a retrying acquire (started at `since`) and subscribes to its keys' release
   * channels on the standalone masters reachable now. Resolves once the subscriptions are active
   * or failed; `fresh` is true when a channel was newly subscribed (a release may have been
   * missed meanwhile: retry at once). Never rejects.
   */
  async subscribe(
    keys: readonly string[],
    since: number,
  ): Promise<{ ticket: HandoffTicket; fresh: boolean }> {
    const acquirer: Acquirer = { keys, since, handed: false };
    this.acquirers.add(acquirer);
    let ended = false;
    const ticket: HandoffTicket = {
      wait: (ms, signal) => this.sleep(acquirer, ms, signal),
      done: () => {
        if (ended) return;
        ended = true;
        this.acquirers.delete(acquirer);
        acquirer.wake?.();
        this.unsubscribe(keys);
      },
    };
    const fresh = keys.filter((k) => {
      const n = this.refs.get(k) ?? 0;
      this.refs.set(k, n + 1);
      return n === 0;
    });
    if (fresh.length === 0 || this.closed) return { ticket, fresh: false };
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
    return { ticket, fresh: true };
  }

  /** Drops one reference to each key; channels without references are unsubscribed. */
  private unsubscribe(keys: readonly string[]): void {
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

  private sleep(acquirer: Acquirer, ms: number, signal?: AbortSignal): Promise<boolean> {
    if (acquirer.handed) {
      acquirer.handed = false;
      return Promise.resolve(true);
    }
    if (signal?.aborted || this.closed || !this.acquirers.has(acquirer)) {
      return Promise.resolve(false);
    }
    return new Promise<boolean>((resolve) => {
      const finish = (byRelease: boolean): void => {
        clearTimeout(timer);
        stopWatching();
        acquirer.wake = undefined;
        resolve(byRelease);
      };
      const timer = setTimeout(() => finish(false), Math.max(0, ms));
      // Shared signals (the engine's drain) get one listener for all sleepers, not one each.
      const stopWatching = signal ? onAbort(signal, () => finish(false)) : () => undefined;
      acquirer.wake = () => {
        const handed = acquirer.handed;
        acquirer.handed = false;
        finish(handed);
      };
    });
  }

  /** Closes the subscriber connections. */
  async close(): Promise<void> {
    this.closed = true;
    for (const a of [...this.acquirers]) a.wake?.();
    const subs = [...this.subscribers.values()];
    this.subscribers.clear();
    await Promise.all(subs.map((s) => s.quit().catch(() => s.disconnect())));
  }

  /** Sizes of the notifier's tables (diagnostics, leak tests). */
  get footprint(): { channels: number; recent: number; acquirers: number } {
    return { channels: this.refs.size, recent: this.recent.size, acquirers: this.acquirers.size };
  }

  private onMessage = (channel: string, token: string): void => {
    // Announcements still on their way when the last waiter of a channel left (every master
    // announces each release) must not re-create its entry: nothing would ever delete it.
    if (!this.refs.has(channel)) return;
    const seen = this.recent.get(channel) ?? [];
    if (seen.includes(token)) return;
    seen.push(token);
    if (seen.length > 8) seen.shift();
    this.recent.set(channel, seen);
    // Hand the release to the longest-waiting acquirer of this process: at once if it sleeps,
    // else at its next wait (it was busy with an attempt that may have just missed the release).
    let oldest: Acquirer | undefined;
    for (const a of this.acquirers) {
      if (!a.handed && a.keys.includes(channel) && (!oldest || a.since < oldest.since)) oldest = a;
    }
    if (!oldest) return;
    oldest.handed = true;
    oldest.wake?.();
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
        this.logger.debug?.(
          `Redlock: subscriber of ${node.name}: ${node.redact(errorMessage(err))}`,
        ),
      );
      sub.on('message', this.onMessage);
      this.subscribers.set(node.index, sub);
    }
    return sub;
  }
}
