/**
 * The Redis store of the fair mode (`fairness: 'across-processes'`, README.md here): the plain
 * store (redis/store.ts) with the masters' side of the hand-over across processes — the fair
 * mutex's scripts (fair-mutex.ts), poll marks, the order and parks on each attempt
 * (fair-attempt.ts), yields and passes on release (install-order.ts), this engine's parked
 * tokens and their installs (installs.ts), and the alive channel the masters check before
 * installing a token for this engine.
 */
import type { LockKind } from '../redis/kinds/kind';
import { aliveChannel, orderKey, parkKey, pollKey } from './fair-keys';
import type { LockKindSpec } from '../base/kind-spec';
import type { ReleaseResult } from '../quorum/protocol';
import type { AttemptParts } from '../redis/attempt';
import { attemptOnMasters } from '../redis/attempt';
import { RedisStore } from '../redis/store';
import type { RedlockClient, ResolvedSettings } from '../base/settings';
import type { AnnouncementListener, Grant, ReleaseWatch } from '../store';
import { fairSeenAs, readFair } from './fair-announcements';
import type { FairAnnouncementListener, FairMessage } from './fair-announcements';
import type { FairContext } from './fair-context';
import { fairAttemptParts } from './fair-attempt';
import { FAIR_MUTEX } from './fair-mutex';
import type { FairAnnounce } from './fair-mutex';
import type { FairAttemptOutcome, FairAttemptRequest, FairGrant } from './fair-store';
import { yieldOrder } from './install-order';
import { Installs } from './installs';
import { UNMARK_SCRIPT } from './unmark-script';

/** The Redis store with the hand-over across processes. */
export class FairRedisStore extends RedisStore implements FairContext {
  /** This engine's parked tokens and their installs. */
  readonly installs: Installs;
  private readonly parts: AttemptParts;

  constructor(clients: readonly RedlockClient[], settings: ResolvedSettings) {
    // (The masters skip a waiting engine that is gone: its alive channel has no subscriber.)
    super(clients, settings, (engineId) => aliveChannel(settings.keyPrefix, engineId));
    this.installs = new Installs(this);
    this.notifier.seenAs = fairSeenAs;
    // Every announcement tells the installs what holds the key on that master now; a yield that
    // installed this engine's parked token is taken in after the watchers heard it.
    this.notifier.tap = (channel, raw, node) => {
      const m = this.read(raw);
      this.installs.news(channel, node, m.token, m.install?.token);
      const own = m.reserved === 'own' ? m.install : undefined;
      return own && (() => this.installs.heard(channel, node, own.token, own.fence, own.age));
    };
    this.notifier.onResubscribed = (node) => this.installs.resubscribed(node);
    this.parts = fairAttemptParts(this);
  }

  /**
   * Release announcements of `resource` as the fair mode reads them (fair-announcements.ts):
   * yields, the engine they reserved the key for, and whether they installed this engine's
   * parked token.
   */
  watchFairReleases(
    resource: string,
    onRelease: FairAnnouncementListener,
  ): Promise<ReleaseWatch | undefined> {
    return this.watchChannel(resource, {
      heard: (raw, repeat) => {
        const m = this.read(raw);
        const installed = m.install !== undefined && m.reserved === 'own';
        onRelease(m.announced, m.token, repeat, m.reserved, installed);
      },
      subscribed: () => onRelease('subscribed', '', false),
    });
  }

  /** The last message read: the tap and then each watcher read the same one. */
  private lastRead: { raw: string; message: FairMessage } | undefined;

  /** {@link readFair} for this engine, read once per message. */
  private read(raw: string): FairMessage {
    if (this.lastRead?.raw !== raw) this.lastRead = { raw, message: readFair(raw, this.engineId) };
    return this.lastRead.message;
  }

  /** {@link watchFairReleases} for a plain listener: a yield is a release of its token. */
  override watchReleases(
    resource: string,
    onRelease: AnnouncementListener,
  ): Promise<ReleaseWatch | undefined> {
    return this.watchFairReleases(resource, (announced, token, repeat) =>
      onRelease(announced === 'yield' ? 'release' : announced, token, repeat),
    );
  }

  /** The fair mutex for plain locks; the other kinds as in the plain store. */
  override kindOf(spec: LockKindSpec | undefined): LockKind {
    return !spec || spec.name === 'mutex' ? FAIR_MUTEX : super.kindOf(spec);
  }

  /** One attempt with the fair parts (fair-attempt.ts), which give its outcome the fair fields. */
  override attempt(req: FairAttemptRequest): Promise<FairAttemptOutcome> {
    return attemptOnMasters(this, req, this.parts) as Promise<FairAttemptOutcome>;
  }

  /**
   * A release; `announce` `'yield'` or `'pass'` (fair-queue.ts `announceAs`, plain locks with
   * release announcements) also reserves the resource for the engine that waited longest or
   * installs its parked token (install-order.ts `yieldOrder`).
   */
  override release(
    grant: Grant,
    waitAll: boolean,
    keepFor?: number,
    only?: readonly number[],
    announce: FairAnnounce = 'release',
  ): Promise<ReleaseResult> {
    const fair = announce === 'yield' || announce === 'pass';
    if (!fair || grant.kind || keepFor || !this.settings.handoff) {
      return this.releaseGrant(grant, waitAll, keepFor, only);
    }
    const { resources, token } = grant;
    const order = yieldOrder(
      this,
      resources,
      announce,
      grant.ttl,
      (grant as FairGrant).installedBy,
    );
    return this.releaseGrant(grant, waitAll, undefined, only, (keys, group) =>
      FAIR_MUTEX.releaseAs(token, keys, announce, group === resources ? order : undefined),
    );
  }

  /** Whether this engine hears the release announcements of the lock key `key` now. */
  hears(key: string): boolean {
    return this.notifier.isLive(key);
  }

  /** The outcomes of this engine's installs (installs.ts). */
  onInstalled(handler: (resource: string, grant: Grant | undefined) => void): void {
    this.installs.onResult(handler);
  }

  /** Whether `token` belongs to a lock of this engine (its engine id starts it: base/token.ts). */
  ownsToken(token: string): boolean {
    return token.startsWith(this.engineId);
  }

  /** Whether this engine parked a token for `resource` that a yield may still install. */
  hasParked(resource: string): boolean {
    return this.installs.hasParked(resource);
  }

  /**
   * Takes this engine's poll mark, its place in the order and its parked tokens of `resource`
   * down on every master (unmark-script.ts; best effort, not awaited).
   */
  unmarkPolling(resource: string): void {
    const parked = this.installs.abandon(resource);
    const prefix = this.settings.keyPrefix;
    const keys = [
      pollKey(prefix, resource),
      orderKey(prefix, resource),
      parkKey(prefix, resource),
      this.keyOf(resource),
    ];
    // With the tokens it parked: where a yield installed one already, it is deleted.
    const args = [this.engineId, ...parked];
    for (const node of this.nodes) {
      node.evalScript(UNMARK_SCRIPT, keys, args).catch(() => undefined); // best effort
    }
  }

  override async close(): Promise<void> {
    this.installs.close();
    await super.close();
  }
}
