import { Timeline } from '../base/clock';
import { clientShape, connectionOf, isRedlockClient, refusedShape } from './connection/adapt';
import { InvalidConfigurationError } from '../base/errors';
import type { GroupReply, LockKind, ScriptCall } from './kinds/kind';
import { SHARED, semaphoreKind } from './kinds/holders';
import { MUTEX } from './kinds/mutex';
import type { LockKindSpec } from '../base/kind-spec';
import { fenceKey, lockKey, markerKey, slotTag } from '../base/keys';
import { Dispatch } from './masters/dispatch';
import { ReleaseNotifier, announcement, announcementOf } from './masters/handoff';
import type { ChannelWatcher } from './masters/handoff';
import { MasterNode } from './masters/node';
import { MasterChecks } from './masters/master-checks';
import { ClockWatch } from './masters/clock-watch';
import { QuarantineNotice, annotateQuarantined } from './masters/quarantine-notice';
import type {
  AnnouncementListener,
  AttemptOutcome,
  AttemptRequest,
  ExtendOutcome,
  Grant,
  InspectOutcome,
  LockStore,
  MasterDistrust,
  ReleaseWatch,
  StoreFootprint,
} from '../store';
import { releaseSummary } from '../quorum/protocol';
import { newEngineId } from '../base/token';
import type { ReleaseResult } from '../quorum/protocol';
import { runRound } from '../quorum/round';
import type { Tally } from '../quorum/round';
import { redactorFor } from '../base/redact';
import type { Redactor } from '../base/redact';
import { attemptOnMasters } from './attempt';
import type { ReleaseKeysOptions, RedisContext, RoundRequest } from './context';
import { extendOnMasters } from './extend';
import { inspectOnMasters } from './inspect';
import { MARKER_AGE_SCRIPT } from './scripts/marker';
import { endWriterWait } from './writer-flag';
import { describe, errorMessage } from '../base/validate';
import type { RedlockClient, ResolvedSettings } from '../base/settings';
import type { MasterHealth } from '../base/types';

/** The {@link LockKind} of a request's kind (the mutex when none is given). */
export function lockKindFor(spec: LockKindSpec | undefined): LockKind {
  if (!spec || spec.name === 'mutex') return MUTEX;
  return spec.name === 'shared' ? SHARED : semaphoreKind(spec.limit ?? 1);
}

/**
 * The Redis store: locks kept on N independent masters with the quorum protocol
 * (quorum/round.ts, quorum/protocol.ts), one {@link LockKind}'s scripts per request, sent through
 * {@link Dispatch} (readiness gate, Cluster slot groups, script fallback). It holds no lock state:
 * grants go to the policy (lib/core/redlock.ts).
 */
export class RedisStore implements LockStore, RedisContext {
  readonly quorum: number;
  readonly nodes: readonly MasterNode[];
  readonly dispatch: Dispatch;
  /** The boot marker's key (restart quarantine). */
  readonly markerKey: string;
  /** This engine's id, the first characters of each of its tokens (base/token.ts). */
  readonly engineId = newEngineId();
  /** Tells the logger, once per master, why it is in restart quarantine and for how long. */
  readonly quarantineNotice: QuarantineNotice;
  /** Removes credentials — also the known passwords of the clients — from texts it reports. */
  private readonly redact: Redactor;
  /** The masters' clocks, checked in every acquire and extension (redis/masters/clock-watch.ts). */
  readonly clocks: ClockWatch;
  /** What each master is — replica, Sentinel, duplicate, evicting — (redis/masters/master-checks.ts). */
  readonly checks: MasterChecks;
  /** Release announcements to this engine's waiters (redis/masters/handoff.ts). */
  protected readonly notifier: ReleaseNotifier;
  /** The voting rounds' timeouts: one timer, kept armed between rounds (base/clock.ts `Timeline`). */
  private readonly deadlines = new Timeline(true);

  /**
   * Rejects anything that is not a non-empty list of distinct clients the engine takes
   * (redis/connection/adapt.ts: ioredis, iovalkey, node-redis).
   */
  static checkClients(clients: unknown): asserts clients is readonly RedlockClient[] {
    if (!Array.isArray(clients) || clients.length === 0) {
      throw new InvalidConfigurationError('clients', 'at least one Redis client is required');
    }
    clients.forEach((c: unknown, i) => {
      const refused = refusedShape(clientShape(c));
      if (refused) throw new InvalidConfigurationError(`clients[${i}]`, `is ${refused}`);
      if (!isRedlockClient(c)) {
        throw new InvalidConfigurationError(
          `clients[${i}]`,
          `must be an ioredis or iovalkey Redis or Cluster instance, or a node-redis client or Cluster client, got ${describe(c)}`,
        );
      }
    });
    if (new Set(clients).size !== clients.length) {
      throw new InvalidConfigurationError('clients', 'the same client instance is listed twice');
    }
  }

  /**
   * @param presence a channel that every subscriber connection of this engine keeps subscribed
   * while it is up (redis/masters/handoff.ts), named from the engine id: other engines' scripts can
   * tell this engine is present (the fair mode's, fair/fair-redis-store.ts).
   */
  constructor(
    clients: readonly RedlockClient[],
    readonly settings: ResolvedSettings,
    presence?: (engineId: string) => string,
  ) {
    const { logger, keyPrefix, quarantine, quorum } = settings;
    this.quorum = quorum;
    const n = clients.length;
    if (n < 3) {
      logger.warn(
        `Redlock: only ${n} master(s); a single failure makes locking unavailable. Use 3 or 5 independent masters.`,
      );
    } else if (n % 2 === 0) {
      logger.warn(
        `Redlock: ${n} masters is an even count; ${n + 1} would tolerate one more failure at no extra quorum cost.`,
      );
    }
    if (quorum <= n / 2) {
      logger.warn(
        `Redlock: quorum ${quorum} of ${n} is not a majority; two holders can own the same lock at once.`,
      );
    }
    this.redact = redactorFor(clients.flatMap((c) => connectionOf(c).secrets));
    this.markerKey = markerKey(keyPrefix);
    this.quarantineNotice = new QuarantineNotice(logger, settings.requestTimeout);
    this.nodes = clients.map(
      (c, i) =>
        new MasterNode(i, c, this.markerKey, quarantine, logger, this.redact, (node, seed) =>
          this.quarantineNotice.note(node, quarantine.duration - seed.age, seed.cause),
        ),
    );
    this.clocks = new ClockWatch(this.nodes, {
      enabled: settings.clockCheck,
      driftFactor: settings.driftFactor,
      tolerance: settings.clockTolerance,
      duration: quarantine.duration,
      logger,
    });
    this.clocks.warm();
    this.notifier = new ReleaseNotifier(
      this.nodes,
      logger,
      settings.requestTimeout,
      presence?.(this.engineId),
    );
    // Off the hot path: the checks may take longer than a vote (a master that has not answered
    // in time is asked again 10 s later; acquires wait for it no longer than their round).
    this.checks = new MasterChecks(
      this.nodes,
      logger,
      this.markerKey,
      Math.max(settings.requestTimeout, 1000),
    );
    this.dispatch = new Dispatch(
      (r) => this.keyOf(r),
      (node) => this.checks.gate(node),
    );
    if (settings.fencing) slotTag(0); // slot tags (base/keys.ts): now, not in an acquire's validity
  }

  get masterNames(): readonly string[] {
    return this.nodes.map((n) => n.name);
  }

  get footprint(): StoreFootprint {
    const f = this.notifier.footprint;
    return { handoffChannels: f.channels, handoffRecent: f.recent, handoffWaiters: f.watches };
  }

  keyOf(resource: string): string {
    return lockKey(this.settings.keyPrefix, resource);
  }

  fenceKeyOf(resource: string): string {
    return fenceKey(this.settings.keyPrefix, resource);
  }

  describe(err: unknown): string {
    return this.redact(errorMessage(err));
  }

  private readonly describeError = (err: unknown): string => this.describe(err);

  /** The {@link LockKind} of a request or grant ({@link lockKindFor}). */
  kindOf(spec: LockKindSpec | undefined): LockKind {
    return lockKindFor(spec);
  }

  /** Votes a lock of `kind` needs: its kind's rule over the configured quorum (kinds/). */
  quorumFor(spec: LockKindSpec | undefined): number {
    return spec ? lockKindFor(spec).quorum(this.nodes.length, this.quorum) : this.quorum;
  }

  /** Runs one voting round over every master (quorum/round.ts); `quorum` defaults to the store's. */
  round<T>(spec: RoundRequest<T>): Promise<Tally<T>> {
    // Spelled out (no spread): one object shape for every round keeps runRound monomorphic.
    return runRound({
      masters: this.nodes,
      quorum: spec.quorum ?? this.quorum,
      timeout: spec.timeout,
      // A master whose votes must not count gets nothing: its vote is the cause, as an error.
      send: this.checks.refusesAny
        ? (node, sink, i) => this.checks.refusal(node) ?? spec.send(node, sink, i)
        : spec.send,
      judge: spec.judge,
      holderTtl: spec.holderTtl,
      describeError: this.describeError,
      waitAll: spec.waitAll,
      lateVotes: spec.lateVotes,
      deadlines: this.deadlines,
    });
  }

  /**
   * One attempt (docs/REDLOCK.md, "N masters", steps 1–5): a grant, or the reason it was not
   * granted, with the clean-up of a failed attempt already sent (redis/attempt.ts).
   */
  attempt(req: AttemptRequest): Promise<AttemptOutcome> {
    return attemptOnMasters(this, req);
  }

  /** A master answered with a fully checked marker age: if it was given a known value, it moved. */
  noteMarkerAge(node: MasterNode): void {
    if (node.knownBirth !== undefined) node.markerMoved();
  }

  /**
   * Masters whose clock the engine stopped trusting (redis/masters/clock-watch.ts): `listener` is
   * told of each. Returns a function that stops it.
   */
  watchMasters(listener: (e: MasterDistrust) => void): () => void {
    return this.clocks.listen(listener);
  }

  distrustOf(node: number): MasterDistrust | undefined {
    return this.clocks.distrustOf(node);
  }

  /** Annotates `quarantined` votes with the time left and tells the logger (once per master). */
  noteQuarantined(tally: Tally<{ readonly markerAge: number | undefined }>): void {
    if (!tally.votes.some((v) => v.outcome === 'quarantined')) return;
    annotateQuarantined(
      tally.votes,
      (i) => {
        const reply = tally.replies[i];
        return reply?.kind === 'reply' ? reply.value.markerAge : undefined;
      },
      this.settings.quarantine.duration,
      this.quarantineNotice,
    );
    this.quarantineNotice.flush();
  }

  extend(grant: Grant, ttl: number, deadline: number): Promise<ExtendOutcome> {
    return extendOnMasters(this, grant, ttl, deadline);
  }

  release(grant: Grant, waitAll: boolean, keepFor?: number): Promise<ReleaseResult> {
    return this.releaseGrant(grant, waitAll, keepFor);
  }

  /**
   * {@link release} on the masters at indexes `only` (all when absent), with `call` instead of
   * the kind's own release script when given (ReleaseKeysOptions.call).
   */
  protected releaseGrant(
    grant: Grant,
    waitAll: boolean,
    keepFor: number | undefined,
    only?: readonly number[],
    call?: ReleaseKeysOptions['call'],
  ): Promise<ReleaseResult> {
    return this.releaseKeys(grant.resources, grant.token, {
      only: only && this.nodes.filter((n) => only.includes(n.index)),
      waitAll,
      announce: 'release',
      kind: grant.kind,
      keepFor,
      call,
    });
  }

  /**
   * Compare-and-delete of `token` on the masters (`only` those, when given). `announce` publishes
   * it for waiters (hand-off, redis/masters/handoff.ts): `'release'` for a granted lock, `'cleanup'`
   * for the keys of a failed attempt — marked, so that waiters whose holder has a quorum are not
   * woken by it, and ignored by this engine's own waiters (see {@link ignoreOwn}).
   */
  async releaseKeys(
    resources: readonly string[],
    token: string,
    options: ReleaseKeysOptions,
  ): Promise<ReleaseResult> {
    const { only, waitAll = false, keepFor } = options;
    const kind = this.kindOf(options.kind);
    const keys = resources.map((r) => this.keyOf(r));
    const announce = this.settings.handoff ? options.announce : false;
    const build =
      options.call ?? ((ks: readonly string[]) => kind.release(token, ks, announce, keepFor));
    // One call for every standalone master; a Cluster master gets one per slot group.
    const whole = build(keys, resources);
    const callFor = (groupKeys: readonly string[], group: readonly string[]): ScriptCall =>
      group === resources ? whole : build(groupKeys, group);
    const read = (groups: readonly GroupReply[]): boolean => kind.readRelease(groups);
    const tally = await this.round<boolean>({
      quorum: this.quorumFor(options.kind),
      timeout: this.settings.requestTimeout,
      send: (node, sink, i) =>
        only && !only.includes(node)
          ? Promise.resolve(false)
          : this.dispatch.readInto(node, resources, keys, callFor, read, sink, i),
      judge: (deleted) => (deleted ? 'ok' : 'held'),
      waitAll,
    });
    return releaseSummary(tally.votes, tally.ok);
  }

  /** Read-only: what a quorum of masters agrees on about `resource` (redis/inspect.ts). */
  inspect(resource: string): Promise<InspectOutcome> {
    return inspectOnMasters(this, resource);
  }

  /**
   * Checks every master (one read-only script each, bounded by the request timeout): reachable,
   * latency, restart quarantine. Names are redacted.
   */
  health(): Promise<MasterHealth[]> {
    const { duration } = this.settings.quarantine;
    return Promise.all(
      this.nodes.map(async (node): Promise<MasterHealth> => {
        const checks = node.checksMarker;
        const reply = await node.request(
          () =>
            checks
              ? node.evalScript(MARKER_AGE_SCRIPT, [this.markerKey], [])
              : node.connection.ping(),
          this.settings.requestTimeout,
        );
        const base = {
          node: node.index,
          name: node.name,
          reachable: false,
          ...this.checks.healthOf(node.index), // unusable, evictionPolicy, unchecked
        };
        if (reply.kind !== 'reply') {
          const error =
            reply.kind === 'timeout' ? 'no answer within the request timeout' : reply.error;
          return Object.assign(base, { latency: undefined, quarantined: false, error });
        }
        const age = typeof reply.value === 'number' ? reply.value : -1;
        // A missing marker (-1) means the next acquire starts the quarantine: all of it is left.
        const restarted = checks && age < duration;
        // A clock jump keeps the votes out as a restart does (redis/masters/clock-watch.ts).
        const clock = this.clocks.state(node.index);
        const quarantined = restarted || clock.remaining > 0;
        const remaining = Math.max(restarted ? duration - Math.max(0, age) : 0, clock.remaining);
        return Object.assign(base, {
          reachable: true,
          latency: Math.round(reply.latency * 100) / 100,
          quarantined,
          ...(quarantined ? { quarantineRemaining: remaining } : {}),
          ...(clock.remaining > 0 ? { clockJump: Math.round(clock.jump) } : {}),
        });
      }),
    );
  }

  writerGaveUp(resources: readonly string[]): void {
    endWriterWait(this, resources); // (redis/writer-flag.ts)
  }

  /** Release announcements of `resource` through the masters' pub/sub (redis/masters/handoff.ts). */
  watchReleases(
    resource: string,
    onRelease: AnnouncementListener,
  ): Promise<ReleaseWatch | undefined> {
    return this.watchChannel(resource, {
      heard: (raw, repeat) => {
        const { announced, token } = announcementOf(raw);
        onRelease(announced, token, repeat);
      },
      subscribed: () => onRelease('subscribed', '', false),
    });
  }

  /**
   * The raw messages on `resource`'s release channel (redis/masters/handoff.ts), while release
   * announcements are on (`handoff`); `undefined` otherwise.
   */
  protected watchChannel(
    resource: string,
    watcher: ChannelWatcher,
  ): Promise<ReleaseWatch | undefined> {
    if (!this.settings.handoff) return Promise.resolve(undefined);
    return this.notifier.watch(this.keyOf(resource), watcher);
  }

  /** The clean-up of an own failed attempt wakes other engines' waiters, not this engine's. */
  ignoreOwn(resources: readonly string[], token: string, cleanup: boolean): void {
    const message = announcement(token, cleanup);
    for (const r of resources) this.notifier.ignore(this.keyOf(r), message);
  }

  async close(): Promise<void> {
    await this.notifier.close();
    this.quarantineNotice.close();
    this.checks.close();
    // The timer kept over an empty heap goes; rounds still in flight keep theirs until they end.
    if (this.deadlines.size === 0) this.deadlines.clear();
    for (const n of this.nodes) n.detach();
  }
}
