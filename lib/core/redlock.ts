import { MAX_TIMER_MS, monotonicNow } from './base/clock';
import { InvalidArgumentError } from './base/errors';
import type { RedlockObserver } from './lock/events';
import { lockKey } from './base/keys';
import { HeldLocks } from './lock/held';
import { expire, lockState, ownedState } from './lock/lock';
import type { Lock, LockedRoutine, ReleaseResult } from './lock/lock';
import { withFields } from './base/fields';
import { acquireLoop, tryOnce } from './policy/acquire';
import { InflightAttempts } from './policy/context';
import type { EngineContext } from './policy/context';
import { FifoQueue } from './waiting/fifo-queue';
import type { EngineMode } from './waiting/waiting';
import { fairMode } from './fair';
import { extendLock } from './policy/extension';
import { inspectResource } from './policy/inspect';
import { distrusted } from './policy/distrust';
import { restoreLock } from './policy/restore';
import { checkReleaseOptions, releaseLock, takeLockAtLeastFor } from './policy/release';
import { keepAlive } from './policy/keep-alive';
import { runUsing } from './policy/using';
import { Observers } from './policy/observers';
import { isStoreFactory } from './store';
import type { StoreFactory } from './store';
import { RedisStore } from './redis/store';
import { resolveSettings } from './base/settings';
import type { RedlockClient, RedlockSettings, ResolvedSettings } from './base/settings';
import type {
  AcquireOptions,
  RedlockFootprint,
  RedlockHealth,
  ReleaseOptions,
  ResourceInspection,
  UsingOptions,
} from './base/types';
import {
  TRY_ACQUIRE_OPTION_NAMES,
  argError,
  checkInteger,
  checkOpenAcquire,
  checkTtl,
} from './base/validate';

/** The default mode: the plain Redis store and the FIFO per resource inside the process. */
const PLAIN_MODE: EngineMode = {
  store: (clients, settings) => new RedisStore(clients, settings),
  queue: (store, draining) => new FifoQueue(store, draining),
};

/**
 * The Redlock algorithm on N independent Redis masters (docs/REDLOCK.md).
 *
 * Framework-free: give it clients, one per master (ioredis, iovalkey or node-redis:
 * docs/clients.md). The engine never closes them; {@link close} only drops what the engine
 * itself created (subscriber connections, listeners).
 *
 * This class is the facade: the settings, the engine's life (drain, close) and the public
 * methods, each a call of an operation (lib/core/policy/) over one engine context
 * (policy/context.ts) — its store (lib/core/store.ts: the masters, lib/core/redis/), its waiting
 * policy, observers, held locks and attempts in flight. The `fairness` setting picks the mode
 * (the plain one below, or lib/core/fair).
 */
export class Redlock {
  /** The validated settings in force. */
  readonly settings: ResolvedSettings;
  /** Votes needed for a decision. */
  readonly quorum: number;
  /** What the engine is made of, as its operations (policy/) see it. */
  private readonly ctx: EngineContext;
  private closed = false;
  /** Aborted by {@link drain}: refuses new acquisitions and wakes the waiting ones. */
  private readonly draining = new AbortController();

  /**
   * @param clients one client per independent master: an ioredis or iovalkey Redis / Cluster,
   * or a node-redis client / Cluster client.
   * @param settings engine settings; unknown names and bad values are an
   * {@link InvalidConfigurationError}.
   */
  constructor(clients: readonly RedlockClient[], settings?: RedlockSettings);
  /** @internal An engine over another store (the testing module's in-memory one). */
  constructor(store: StoreFactory, settings?: RedlockSettings);
  constructor(source: readonly RedlockClient[] | StoreFactory, settings: RedlockSettings = {}) {
    const isFactory = isStoreFactory(source);
    if (!isFactory) RedisStore.checkClients(source);
    this.settings = resolveSettings(settings, isFactory ? source.masters : source.length);
    this.quorum = this.settings.quorum;
    const mode = this.settings.fairness === 'across-processes' ? fairMode : PLAIN_MODE;
    const store = isFactory ? source.open(this.settings) : mode.store(source, this.settings);
    this.ctx = {
      owner: this,
      settings: this.settings,
      store,
      queue: mode.queue(store, this.draining.signal),
      observers: new Observers(this.settings.logger, (err) => store.describe(err)),
      held: new HeldLocks(),
      inflight: new InflightAttempts(),
      draining: this.draining.signal,
    };
    // A master whose clock jumped: the locks that needed its vote are re-checked at once.
    this.stopWatchingMasters = store.watchMasters?.((e) => distrusted(this.ctx, e));
  }

  /** Stops the re-check of held locks on a master's clock jump (close). */
  private readonly stopWatchingMasters: (() => void) | undefined;

  /** Number of masters. */
  get masterCount(): number {
    return this.ctx.store.masterNames.length;
  }

  /** Redacted addresses of the masters, in order. */
  get masterNames(): readonly string[] {
    return this.ctx.store.masterNames;
  }

  /**
   * Locks acquired by this engine and not yet released. A lock left to expire leaves the list
   * shortly after its validity ended (at most about 50 ms later, or at the next read of its
   * signal).
   */
  get heldLocks(): readonly Lock[] {
    return this.ctx.held.list();
  }

  /**
   * Sizes of the engine's internal tables — for diagnostics and leak checks: in a long-running
   * process they follow the current load and return to zero when it stops.
   */
  get footprint(): RedlockFootprint {
    const { held, store, queue } = this.ctx;
    return { heldLocks: held.size, ...store.footprint, queuedAcquires: queue.size };
  }

  /**
   * Subscribes to engine events (acquired, failed, extended, released, lost) — for metrics, logs
   * and tracing. Costs nothing while nobody observes. Returns a function that unsubscribes.
   */
  observe(observer: RedlockObserver): () => void {
    if (typeof observer !== 'function')
      throw new InvalidArgumentError('observer', 'must be a function');
    return this.ctx.observers.add(observer);
  }

  /**
   * Redis key of a resource's lock: `${keyPrefix}{resource}` (the hash tag keeps a resource's
   * keys in one Cluster slot); a resource containing `}` gets a derived tag (see base/keys.ts).
   */
  keyOf(resource: string): string {
    return lockKey(this.settings.keyPrefix, resource);
  }

  /**
   * Acquires a lock on all `resources` (all-or-nothing), retrying on contention up to
   * `retryCount` times or until `waitTimeout`. Throws {@link LockContendedError},
   * {@link NoQuorumError}, {@link WaitTimeoutError}, {@link LockAbortedError}, or
   * {@link ShuttingDownError} once the engine drains.
   */
  acquire(resources: string | readonly string[], options: AcquireOptions = {}): Promise<Lock> {
    // Not an async function: a queued acquire keeps one suspended frame (the loop's), not two —
    // the memory of 10,000 waiters . Bad arguments still reject, never throw.
    try {
      const { rest, lockAtLeastFor } = takeLockAtLeastFor(options, this.settings);
      const req = checkOpenAcquire(resources, rest, this.settings, this.draining.signal);
      return acquireLoop(this.ctx, req, monotonicNow(), lockAtLeastFor);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * One attempt, no waiting: the lock, or `null` when another holder has it. Throws
   * {@link NoQuorumError} when too few masters answered (an outage is not "someone holds it"),
   * {@link ShuttingDownError} once the engine drains.
   */
  async tryAcquire(
    resources: string | readonly string[],
    options: Omit<AcquireOptions, 'retryCount' | 'waitTimeout'> = {},
  ): Promise<Lock | null> {
    const { rest, lockAtLeastFor } = takeLockAtLeastFor(options, this.settings);
    const req = withFields(
      checkOpenAcquire(
        resources,
        rest,
        this.settings,
        this.draining.signal,
        TRY_ACQUIRE_OPTION_NAMES,
      ),
      {
        retryCount: 0,
        waitTimeout: undefined,
        writerWait: 0, // one attempt: a plain lock refused by readers raises no writer-waiting flag
      },
    );
    return tryOnce(this.ctx, req, monotonicNow(), lockAtLeastFor);
  }

  /**
   * Releases a lock: compare-and-delete on **every** master, each bounded by the request timeout.
   * Resolves once every master answered or its request timed out (a majority's deletes free the
   * lock for others as they land; the result says whether every master deleted its key:
   * `complete`) — or, with `options.wait: 'quorum'`, once a quorum deleted it (see
   * {@link ReleaseOptions.wait}). Never throws because
   * the lock expired. While the lock's `lockAtLeastFor` (or `options.lockAtLeastFor`, which
   * overrides it) has not passed since the grant, the keys are kept until then instead
   * (compare-and-pexpire to the remainder, no hand-off announcement); the lock is released on
   * the holder's side all the same. A plain lock whose next local waiter wants exactly its
   * resources is handed over instead (one round; resolved once every master answered the waiter's
   * attempt, at most the request timeout after its grant, the old token deleted only where the
   * take-over did not land).
   */
  async release(lock: Lock, options?: ReleaseOptions): Promise<ReleaseResult> {
    const s = ownedState(lock, this);
    const { lockAtLeastFor, atQuorum } = checkReleaseOptions(options, this.settings);
    return releaseLock(this.ctx, lock, s, false, lockAtLeastFor ?? s.lockAtLeastFor, atQuorum);
  }

  /**
   * Extends a lock to `ttl` ms from now (default: its current ttl) with compare-and-pexpire on
   * every master. Succeeds only when a quorum accepts within the remaining validity. With the
   * `repairOnExtend` setting (default) it also puts the key back (`SET NX`, same token) on
   * masters that lost it; those do not count toward the quorum (see redis/repair.ts). Throws
   * {@link LockLostError} when the lock is gone, {@link NoQuorumError} when too few masters
   * answered in time (the lock keeps its old validity), {@link ExtensionLimitError} past
   * `maxExtensions`.
   */
  async extend(lock: Lock, ttl?: number): Promise<Lock> {
    const s = ownedState(lock, this);
    const newTtl = ttl === undefined ? s.ttl : checkTtl('ttl', ttl, this.settings, argError);
    return extendLock(this.ctx, lock, s, newTtl);
  }

  /**
   * Takes over a lock serialized by another engine over the same masters and key prefix
   * (`lock.toJSON()`, `JSON.parse(JSON.stringify(lock))`): a {@link Lock} of this engine that
   * can be extended and released here, with its signal. No Redis call. Its validity is
   * conservative: the keys' wall-clock expiry − now − drift (ttl × driftFactor + 2 ms), so the
   * processes' clocks must agree within the drift. A lock that has expired is restored as lost:
   * `extend` throws {@link LockLostError} without touching Redis, `release` is harmless. Anything
   * that is not a valid serialized lock is an {@link InvalidLockDataError}.
   */
  restore(data: unknown): Lock {
    return restoreLock(this.ctx, data);
  }

  /**
   * Acquires, runs `routine(signal, lock)`, extends the lock automatically before it expires and
   * always releases. `signal` aborts (reason: {@link LockLostError}) at the local validity
   * deadline or as soon as an extension fails. A release error never masks the routine's result or
   * error (it goes to the logger). No timer outlives the call.
   */
  using<T>(
    resources: string | readonly string[],
    routine: LockedRoutine<T>,
    options: UsingOptions = {},
  ): Promise<T> {
    return runUsing(this, resources, routine, options, (err) => this.ctx.store.describe(err));
  }

  /**
   * Starts extending `lock` before it expires (bounded by `maxExtensions`); the lock's signal
   * aborts when an extension fails. Returns a function that stops it. Used by {@link using} and
   * by the Nest layer.
   */
  keepAlive(lock: Lock, extendThreshold?: number): () => void {
    const s = ownedState(lock, this);
    if (extendThreshold !== undefined) {
      checkInteger('extendThreshold', extendThreshold, 1, MAX_TIMER_MS, argError);
    }
    const ctx = withFields(this.settings, { extend: (l: Lock) => this.extend(l) });
    return keepAlive(ctx, lock, s, extendThreshold);
  }

  /**
   * Checks every master (one read-only script each, bounded by the request timeout): reachable,
   * latency, restart quarantine, and what the checks after its (re)connect found (`unusable`,
   * `evictionPolicy`); and whether a quorum is available. Names are redacted.
   */
  async health(): Promise<RedlockHealth> {
    const masters = await this.ctx.store.health();
    const usable = masters.filter(
      (m) => m.reachable && !m.quarantined && m.unusable === undefined,
    ).length;
    const draining = this.isDraining;
    return {
      quorum: this.quorum,
      usable,
      available: usable >= this.quorum && !draining,
      draining,
      masters,
    };
  }

  /**
   * What a quorum of masters agrees on about `resource`, read-only: `{ resource, locked,
   * holders, ttl }` (see {@link ResourceInspection}). One script per master, in parallel, each
   * bounded by the request timeout; no write of any kind, not an attempt (no event, no retry).
   * A master in restart quarantine counts only where it reports holders. Throws
   * {@link InvalidArgumentError} for a bad resource, {@link NoQuorumError} when fewer than a
   * quorum of masters outside quarantine answered.
   */
  inspect(resource: string): Promise<ResourceInspection> {
    return inspectResource(this.ctx.store, resource);
  }

  /** Whether a quorum of masters agrees that `resource` is held: `(await inspect(r)).locked`. */
  async isLocked(resource: string): Promise<boolean> {
    return (await this.inspect(resource)).locked;
  }

  /**
   * Stops taking new locks (graceful shutdown, first step): from now on `acquire`, `tryAcquire`
   * and `using` throw {@link ShuttingDownError}, and acquisitions that are waiting for a retry
   * end with it at once. Locks already held are untouched: they can still be extended
   * (auto-extension keeps running) and released. Idempotent; {@link close} implies it.
   */
  drain(): void {
    this.draining.abort();
  }

  /** `true` once {@link drain} or {@link close} was called: no new locks are taken. */
  get isDraining(): boolean {
    return this.draining.signal.aborted;
  }

  /**
   * Stops the engine: stops taking new locks ({@link drain}), releases every lock it still holds
   * — aborting each one's `signal` (reason: {@link LockLostError}) before its keys are deleted —,
   * closes its subscriber connections and detaches its listeners. The clients given to the
   * constructor are left open.
   */
  async close(): Promise<void> {
    this.drain();
    if (this.closed) return;
    this.closed = true;
    // Grants still on the wire are refused and released by refuseLate: wait for them first.
    const { inflight, held, queue, store } = this.ctx;
    await inflight.settled();
    const locks = held.list();
    // A lock released by shutdown stops protecting its holder, who may still be running (a
    // `using()` routine, a locked call past the shutdown timeout): its signal aborts first —
    // before any key is deleted and another process can take the resource.
    for (const lock of locks) {
      const s = lockState(lock);
      if (!s.released) expire(lock, s, 'the engine was closed (shutdown) while it was held');
    }
    // Wait for every master's answer (not just a majority): the caller closes the clients next.
    await Promise.all(
      locks.map((l) => releaseLock(this.ctx, l, lockState(l), true).catch(() => undefined)),
    );
    held.stop();
    queue.close();
    this.stopWatchingMasters?.();
    await store.close();
  }
}
