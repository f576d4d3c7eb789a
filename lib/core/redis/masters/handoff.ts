import { monotonicNow } from '../../base/clock';
import type { MasterNode } from './node';
import { errorMessage } from '../../base/validate';
import type { Announced, ReleaseWatch } from '../../base/announcements';
import { CLEANUP_PREFIX } from '../scripts/announce';
import type { RedlockLogger } from '../../base/settings';
import type { Subscriber } from '../connection/connection';

/** The message announcing the deletion of `token`'s keys (a release, or a clean-up). */
export function announcement(token: string, cleanup: boolean): string {
  return cleanup ? CLEANUP_PREFIX + token : token;
}

/**
 * What a message says in the default mode: a clean-up (`~token`) or a release (the token). A
 * message of another form (another mode's) is taken as a release of what it names: its watchers
 * wake and ask again, which is always safe.
 */
export function announcementOf(raw: string): { announced: Announced; token: string } {
  return raw.startsWith(CLEANUP_PREFIX)
    ? { announced: 'cleanup', token: raw.slice(CLEANUP_PREFIX.length) }
    : { announced: 'release', token: raw };
}

/** Who watches a channel (see {@link ReleaseNotifier.watch}). */
export interface ChannelWatcher {
  /**
   * A message of master `node` on the channel; `repeat` when another master already sent the
   * same one (compared by {@link ReleaseNotifier.seenAs}).
   */
  heard(raw: string, repeat: boolean, node: number): void;
  /**
   * The watch had resolved with no master's confirmation and one came now, or a master's
   * subscriber connection was lost and its subscriptions are confirmed again: a release
   * announced before it was heard by nobody.
   */
  subscribed(): void;
}

/** One subscribed release channel (a lock key) and who listens to it. */
interface Channel {
  /** One entry per watch (the engine's local queue keeps one watch per contended resource). */
  readonly listeners: Set<ChannelWatcher>;
  /** Recently announced tokens: every master announces each release once. At most 8. */
  readonly recent: string[];
  /** Settles once the subscriptions were confirmed or failed. */
  ready?: Promise<void>;
  /** At least one master confirmed the subscription (also after the request timeout). */
  live: boolean;
  /**
   * Monotonic ms of the latest confirmation before `ready` settled, or of the first one after it
   * when none came before, or of the re-subscription after a subscriber connection was lost
   * (-Infinity until then): a release announced before it was not heard.
   */
  activeSince: number;
  /** `ready` settled: a first confirmation after it is told to the listeners (`subscribed`). */
  settled: boolean;
}

/**
 * Fast hand-off: the release script publishes the released token on a channel named like each
 * released key; watchers subscribe through one shared subscriber connection per master and are
 * called for each master's message, with whether another master already sent it (`repeat`: the
 * N announcements of one release are told apart from news). What a message says is read by the
 * store ({@link announcementOf}; the fair mode reads more: lib/core/fair/fair-announcements.ts).
 *
 * The notifier only maps messages to watchers. Who goes first is decided by the engine's
 * waiting policy (waiting/fifo-queue.ts): it keeps one watch per contended resource and wakes
 * the head of that resource's queue — waiters never poll while a lock is held.
 *
 * - A channel is subscribed with its first watch and unsubscribed with its last; its entry (and
 *   its recent tokens) is dropped with it. Announcements still on their way for a channel nobody
 *   watches any more are ignored (they never re-create an entry).
 * - A subscriber connection that was lost and is ready again is re-subscribed here (not by
 *   the client, on standalone masters: redis/connection/connection.ts `SubscriberHandlers`); once it confirms every channel again, the watchers are told
 *   (`subscribed`), since a release announced on that master while it was away was heard by
 *   nobody.
 * - Subscriber connections are closed by {@link close}.
 */
export class ReleaseNotifier {
  private readonly subscribers = new Map<number, Subscriber>();
  private readonly channels = new Map<string, Channel>();
  private closed = false;

  constructor(
    private readonly nodes: readonly MasterNode[],
    private readonly logger: RedlockLogger,
    private readonly timeout: number,
    /**
     * A channel subscribed first on each standalone master's subscriber connection, again after
     * it was lost, and never unsubscribed: the masters can tell this engine has a subscriber
     * there (the store's presence channel, if any).
     */
    private readonly presence?: string,
  ) {}

  /** The part of a message that tells repeats apart (default: the whole message). */
  seenAs: (raw: string) => string = (raw) => raw;

  /**
   * Told every message on a watched channel once, before its watchers; what it returns, if
   * anything, is called after them.
   */
  tap?: (channel: string, raw: string, node: number) => (() => void) | void;

  /**
   * Calls `listener` once per release of `key` until the returned watch is stopped. Resolves once
   * the subscriptions are active or failed (each bounded by the request timeout); `live` when at
   * least one master confirmed it, `activeSince` when the latest did by then. When none had (a
   * subscriber connection still being made on a loaded machine), the first later confirmation is
   * told to the listeners as `subscribed`: a release announced before it was heard by nobody,
   * and a waiter that then saw the lock still held would sleep a whole ttl. Never rejects.
   */
  async watch(key: string, watcher: ChannelWatcher): Promise<ReleaseWatch> {
    let channel = this.channels.get(key);
    if (!channel) {
      channel = {
        listeners: new Set(),
        recent: [],
        live: false,
        activeSince: -Infinity,
        settled: false,
      };
      this.channels.set(key, channel);
      channel.ready = this.subscribeChannel(key, channel);
    }
    const ch = channel;
    // A distinct entry per watch: the same watcher may watch twice.
    const entry: ChannelWatcher = {
      heard: (raw, repeat, node) => watcher.heard(raw, repeat, node),
      subscribed: () => watcher.subscribed(),
    };
    ch.listeners.add(entry);
    let stopped = false;
    const stop = (): void => {
      if (stopped) return;
      stopped = true;
      ch.listeners.delete(entry);
      if (ch.listeners.size > 0 || this.channels.get(key) !== ch) return;
      this.channels.delete(key);
      for (const sub of this.subscribers.values()) sub.unsubscribe([key]).catch(() => undefined);
    };
    await ch.ready;
    return {
      get live() {
        return ch.live;
      },
      get activeSince() {
        return ch.activeSince;
      },
      stop,
    };
  }

  private async subscribeChannel(key: string, ch: Channel): Promise<void> {
    if (this.closed) return;
    await Promise.all(
      this.nodes.map(async (node) => {
        const sub = this.subscriberFor(node);
        // Waited for at most the request timeout; a subscription confirmed later (a subscriber
        // connection still being made) makes the channel live then.
        const confirm = (): Promise<unknown> =>
          sub.subscribe([key]).then((n) => {
            // Live only now, after the watch resolved without any confirmation: a release may
            // have been announced before, while nothing listened.
            const late = ch.settled && !ch.live;
            ch.live = true;
            if (!ch.settled || late) ch.activeSince = monotonicNow();
            if (late && this.channels.get(key) === ch) {
              for (const listener of [...ch.listeners]) listener.subscribed();
            }
            return n;
          });
        const reply = await node.request(confirm, this.timeout);
        if (reply.kind !== 'reply') {
          this.logger.debug?.(`Redlock: subscribe on ${node.name}: ${reply.kind}`);
        }
      }),
    );
    ch.settled = true;
  }

  /**
   * A subscriber connection is ready again after it was lost: every watched channel is
   * subscribed again (a Cluster client has re-sent them itself; once more is harmless), and once
   * that is confirmed the watchers of every channel are told (`subscribed`): a release announced
   * on that master in between reached nobody, and its waiters would sleep until the holder's
   * expiry. A failure (the connection lost again, the engine closing) is logged, never thrown.
   */
  private reconnected(node: MasterNode, sub: Subscriber): void {
    const keys = [...this.channels.keys()];
    const presence = this.presenceOn(node);
    if (this.closed || keys.length + presence.length === 0) return;
    sub.subscribe([...presence, ...keys]).then(
      () => {
        if (keys.length === 0) return;
        this.onResubscribed?.(node.index);
        const now = monotonicNow();
        for (const key of keys) {
          const ch = this.channels.get(key);
          if (!ch) continue;
          ch.live = true;
          ch.activeSince = now;
          for (const listener of [...ch.listeners]) listener.subscribed();
        }
      },
      (err: unknown) =>
        this.logger.debug?.(
          `Redlock: re-subscribe on ${node.name}: ${node.redact(errorMessage(err))}`,
        ),
    );
  }

  /**
   * Closes the subscriber connections; every watch is forgotten. Each gets a QUIT and at most the
   * request timeout (at least 100 ms) to answer it, then is disconnected: a master that stopped
   * answering never holds up the engine's close (a Nest shutdown).
   */
  async close(): Promise<void> {
    this.closed = true;
    this.channels.clear();
    const subs = [...this.subscribers.values()];
    this.subscribers.clear();
    const wait = Math.max(100, this.timeout);
    await Promise.all(subs.map((s) => s.close(wait)));
  }

  /** Whether announcements on `key` reach this engine now (a master confirmed the subscription). */
  isLive(key: string): boolean {
    return this.channels.get(key)?.live === true;
  }

  /** Sizes of the notifier's tables (diagnostics, leak tests). */
  get footprint(): { channels: number; recent: number; watches: number } {
    let recent = 0;
    let watches = 0;
    for (const ch of this.channels.values()) {
      if (ch.recent.length > 0) recent++;
      watches += ch.listeners.size;
    }
    return { channels: this.channels.size, recent, watches };
  }

  /**
   * Marks `message` (see {@link announcement}) on `key` as seen: the clean-up of this engine's
   * own failed attempt is announced for the waiters of other engines, never to wake this
   * engine's own.
   */
  ignore(key: string, message: string): void {
    const ch = this.channels.get(key);
    if (!ch) return;
    ch.recent.push(message);
    if (ch.recent.length > 8) ch.recent.shift();
  }

  /**
   * Called when master `node`'s subscriber connection was lost and its subscriptions are
   * confirmed again (a message sent meanwhile was heard by nobody).
   */
  onResubscribed?: (node: number) => void;

  private onMessage(channel: string, raw: string, node: number): void {
    const ch = this.channels.get(channel);
    if (!ch) return;
    // Every master that deleted a key announces it: listeners hear the first as news and the
    // others as repeats (waiting/fifo-queue.ts wakes a head refused by that holder again).
    const seen = this.seenAs(raw);
    const repeat = ch.recent.includes(seen);
    if (!repeat) {
      ch.recent.push(seen);
      if (ch.recent.length > 8) ch.recent.shift();
    }
    const after = this.tap?.(channel, raw, node);
    for (const listener of [...ch.listeners]) listener.heard(raw, repeat, node);
    after?.();
  }

  /**
   * The subscriber connection of `node`, made on first use (redis/connection/connection.ts
   * `Connection.subscriber`). A Cluster master's subscriber is a Cluster client of its own, which
   * hears the releases of every slot. A script that counts a channel's subscribers (PUBSUB
   * NUMSUB) counts them per node, so on a Cluster of several nodes another engine's watch may go
   * unseen by it (lib/core/fair/README.md, Limits).
   */
  private subscriberFor(node: MasterNode): Subscriber {
    let sub = this.subscribers.get(node.index);
    if (!sub) {
      const made: Subscriber = node.connection.subscriber({
        message: (channel, message) => this.onMessage(channel, message, node.index),
        reconnected: () => this.reconnected(node, made),
        error: (err) =>
          this.logger.debug?.(
            `Redlock: subscriber of ${node.name}: ${node.redact(errorMessage(err))}`,
          ),
      });
      sub = made;
      this.subscribers.set(node.index, sub);
      // First on the connection: a watch's subscription confirmed later confirms it too.
      const presence = this.presenceOn(node);
      if (presence.length > 0) {
        sub
          .subscribe(presence)
          .catch((err: unknown) =>
            this.logger.debug?.(
              `Redlock: subscribe on ${node.name}: ${node.redact(errorMessage(err))}`,
            ),
          );
      }
    }
    return sub;
  }

  /** The presence channel to keep subscribed on `node`: none on a Cluster (not checked there). */
  private presenceOn(node: MasterNode): string[] {
    return this.presence === undefined || node.cluster ? [] : [this.presence];
  }
}
