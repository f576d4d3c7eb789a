import { randomBytes } from 'node:crypto';
import { monotonicNow } from '../core/clock';
import {
  ExtensionLimitError,
  InvalidArgumentError,
  LockContendedError,
  LockLostError,
  NoQuorumError,
} from '../core/errors';
import type { LockErrorDetail, NodeOutcome, NodeVote } from '../core/errors';
import { Lock, expire, lockState } from '../core/lock';
import type { ReleaseResult } from '../core/lock';
import { Redlock, normalizeResources } from '../core/redlock';
import type { AcquireRequest, AttemptResult, RedlockHealth } from '../core/redlock';
import { MAX_TIMER_MS, checkInteger } from '../core/settings';
import { onAbort } from '../core/wake';
import { checkTtl } from '../core/validate';
import type { RedlockClient, RedlockLogger, RedlockSettings } from '../core/settings';

/**
 * Settings of an {@link InMemoryRedlock}: the engine settings that mean something without Redis.
 * (`quorum`, `quarantine`, `handoff` and `requestTimeout` are about masters and are ignored.)
 */
export type InMemoryRedlockSettings = Omit<
  RedlockSettings,
  'quorum' | 'quarantine' | 'handoff' | 'requestTimeout'
>;

/** Who holds a resource in an {@link InMemoryRedlock}. */
export type InMemoryHolder =
  /** A lock acquired through this engine. */
  | { readonly kind: 'lock'; readonly lock: Lock }
  /** A hold made with {@link InMemoryRedlock.hold}: "someone else" (another instance, a stale process). */
  | { readonly kind: 'external' };

interface Entry {
  readonly token: string;
  /** Monotonic ms at which the key would expire in Redis; `Infinity` for an open-ended hold. */
  expiresAt: number;
  readonly lock?: Lock;
}

const NODE_NAME = 'in-memory';

/**
 * The object handed to the `Redlock` constructor in place of an ioredis client. The in-memory
 * engine overrides every operation that would reach a master, so it is never called; it only
 * has to pass the constructor's shape check.
 */
function placeholderClient(): RedlockClient {
  const unreachable = (): never => {
    throw new Error('InMemoryRedlock never talks to Redis');
  };
  const client = {
    isCluster: false,
    status: 'ready',
    options: { host: NODE_NAME, port: 0 },
    evalsha: unreachable,
    eval: unreachable,
    on: () => client,
    off: () => client,
  };
  return client as unknown as RedlockClient;
}

/**
 * A single-process stand-in for the {@link Redlock} engine, for tests that must not need Redis.
 *
 * It keeps the real engine's contract: same methods, same {@link Lock} objects (validity, signal,
 * fencing tokens, extensions), same errors ({@link LockContendedError}, {@link WaitTimeoutError},
 * {@link LockAbortedError}, {@link LockLostError}, {@link ExtensionLimitError},
 * {@link InvalidArgumentError}), and real exclusion with ttl expiry. Only the storage steps are
 * its own (one attempt, deleting keys, extending, waiting between attempts): the acquire loop,
 * `tryAcquire`, `release`, `using()`, `keepAlive()`, validation and events are the real engine's
 * code.
 *
 * On top, fault controls for tests: {@link hold} / {@link free} a resource as if another
 * process held it, {@link loseLock} (the holder's signal aborts with a {@link LockLostError}),
 * {@link setAvailable} (every operation fails with {@link NoQuorumError}, as when a majority of
 * masters is down).
 *
 * It is an instance of `Redlock` so that it can be injected wherever the engine is expected.
 */
export class InMemoryRedlock extends Redlock {
  private readonly entries = new Map<string, Entry>();
  private readonly fences = new Map<string, number>();
  private readonly sleepers = new Set<() => void>();
  private available = true;

  /** @param settings engine settings (ttl, maxTtl, retries, drift, fencing, ...). */
  constructor(settings: InMemoryRedlockSettings = {}) {
    const logger = settings.logger;
    const quiet: RedlockLogger = {
      // The base constructor warns about a single master: irrelevant for an in-process engine.
      warn: (message) => {
        if (!message.startsWith('Redlock: only 1 master')) logger?.warn(message);
      },
      debug: (message) => logger?.debug?.(message),
    };
    super([placeholderClient()], {
      ...(settings as RedlockSettings),
      quorum: undefined,
      quarantine: false,
      handoff: false,
      // Meaningless without network; set below any valid ttl (> 1) so validation accepts it.
      requestTimeout: 1,
      logger: quiet,
    });
  }

  /** Always `['in-memory']`. */
  override get masterNames(): readonly string[] {
    return [NODE_NAME];
  }

  /**
   * Extends the lock to `ttl` ms from now (default: its current ttl). Same rules as the real
   * engine with its single master: a lost key is lost for good (the real engine's repair,
   * `repairOnExtend`, never counts a master whose key was put back, so with one master it could
   * not save the lock either); {@link LockLostError} when it is gone,
   * {@link ExtensionLimitError} past `maxExtensions`, {@link NoQuorumError} during a simulated
   * outage (the lock keeps its old validity).
   */
  override async extend(lock: Lock, ttl?: number): Promise<Lock> {
    const s = this.stateOf(lock);
    const newTtl = ttl === undefined ? s.ttl : checkTtl('ttl', ttl, this.settings, argError);
    const detail = (votes: readonly NodeVote[]): LockErrorDetail => ({
      resources: lock.resources,
      votes,
      attempts: 1,
      elapsed: 0,
    });
    if (s.released) throw new LockLostError(detail(s.votes), 'it was released');
    if (s.extensions >= this.settings.maxExtensions) {
      throw new ExtensionLimitError({
        ...detail(s.votes),
        maxExtensions: this.settings.maxExtensions,
      });
    }
    const now = monotonicNow();
    if (s.validUntil - now <= 0) {
      expire(lock, s, 'validity ended before the extension');
      throw new LockLostError(detail(s.votes), 'its validity ended before the extension');
    }
    if (!this.available) {
      throw new NoQuorumError({
        ...detail([vote('error', 'simulated outage')]),
        reason: 'unavailable',
        quorum: this.quorum,
      });
    }
    const mine = lock.resources.map((r) => this.live(r, now));
    if (!mine.every((e) => e?.token === lock.value)) {
      expire(lock, s, 'a majority of masters no longer hold it');
      throw new LockLostError(detail([vote('held')]), 'a majority of masters no longer hold it');
    }
    for (const e of mine) if (e) e.expiresAt = now + newTtl;
    return this.extended(lock, {
      ttl: newTtl,
      start: now,
      wallStart: Date.now(),
      end: monotonicNow(),
      votes: [vote('ok')],
    });
  }

  /**
   * Health of the simulated single master: reachable unless an outage is simulated
   * (`setAvailable(false)`), never in quarantine; `available` also turns false while draining.
   */
  override async health(): Promise<RedlockHealth> {
    const reachable = this.available;
    const draining = this.isDraining;
    return {
      quorum: this.quorum,
      usable: reachable ? 1 : 0,
      available: reachable && !draining,
      draining,
      masters: [
        reachable
          ? { node: 0, name: NODE_NAME, reachable, latency: 0, quarantined: false }
          : {
              node: 0,
              name: NODE_NAME,
              reachable,
              latency: undefined,
              quarantined: false,
              error: 'simulated outage',
            },
      ],
    };
  }

  /** Releases every lock still held, wakes waiting acquires; later acquires are refused. */
  override async close(): Promise<void> {
    await super.close();
    this.wake();
  }

  // --- fault controls -------------------------------------------------------------------------

  /**
   * Makes `resources` look held by another process for `ttl` ms (default: until {@link free}).
   * Throws when one of them is already held.
   */
  hold(resources: string | readonly string[], ttl?: number): void {
    const list = normalizeResources(resources);
    const until =
      ttl === undefined
        ? Infinity
        : monotonicNow() + checkInteger('ttl', ttl, 1, MAX_TIMER_MS, argError);
    const now = monotonicNow();
    const busy = list.filter((r) => this.live(r, now));
    if (busy.length > 0) {
      throw new Error(`InMemoryRedlock.hold: ${busy.join(', ')} already held`);
    }
    const token = `external:${randomBytes(8).toString('hex')}`;
    for (const r of list) this.entries.set(r, { token, expiresAt: until });
  }

  /** Ends holds made with {@link hold}. Returns `true` when something was freed. */
  free(resources: string | readonly string[]): boolean {
    let freed = false;
    for (const r of normalizeResources(resources)) {
      const e = this.entries.get(r);
      if (e && !e.lock) {
        this.entries.delete(r);
        freed = true;
      }
    }
    if (freed) this.wake();
    return freed;
  }

  /**
   * Simulates the loss of the lock that holds `resource` (its key vanished from a majority of
   * masters): the resource becomes free, the holder's `signal` aborts with a
   * {@link LockLostError} and its next extension fails. Returns the lost lock, if one held it.
   */
  loseLock(resource: string): Lock | undefined {
    const [r] = normalizeResources(resource);
    const e = this.live(r, monotonicNow());
    if (!e?.lock) return undefined;
    this.entries.delete(r);
    loseNow(e.lock, 'it was lost (simulated by the testing module)');
    this.wake();
    return e.lock;
  }

  /**
   * `false` simulates losing a majority of masters: acquires fail with {@link NoQuorumError},
   * extensions fail (locks run out their validity), releases delete nothing. `true` restores.
   */
  setAvailable(available: boolean): void {
    this.available = available;
    if (available) this.wake();
  }

  /** Who holds `resource` now (expired holds are dropped), or `undefined` when it is free. */
  holderOf(resource: string): InMemoryHolder | undefined {
    const e = this.live(resource, monotonicNow());
    if (!e) return undefined;
    return e.lock ? { kind: 'lock', lock: e.lock } : { kind: 'external' };
  }

  /** Whether `resource` is held (by a lock of this engine or by {@link hold}). */
  isHeld(resource: string): boolean {
    return this.holderOf(resource) !== undefined;
  }

  /** Resources held right now, sorted. */
  heldResources(): string[] {
    const now = monotonicNow();
    return [...this.entries.keys()].filter((r) => this.live(r, now)).sort();
  }

  /**
   * Forgets every hold and lock entry (locks already handed out lose their resources: their
   * signals abort) and restores availability. Fencing counters keep increasing.
   */
  reset(): void {
    for (const e of this.entries.values()) {
      if (e.lock) loseNow(e.lock, 'the in-memory engine was reset');
    }
    this.entries.clear();
    this.available = true;
    this.wake();
  }

  // ---------------------------------------------------------------------------------------------

  /** One attempt against the in-process table (the real engine's algorithm runs around it). */
  protected override async attemptOnce(
    req: AcquireRequest,
    attemptNo: number,
    startedAt: number,
  ): Promise<AttemptResult> {
    const { resources, ttl } = req;
    const now = monotonicNow();
    const detail = (votes: NodeVote[]): LockErrorDetail => ({
      resources,
      votes,
      attempts: attemptNo,
      elapsed: now - startedAt,
    });
    if (!this.available) {
      return {
        error: new NoQuorumError({
          ...detail([vote('error', 'simulated outage')]),
          reason: 'unavailable',
          quorum: this.quorum,
        }),
      };
    }
    const holders = resources.map((r) => this.live(r, now)).filter((e) => e !== undefined);
    if (holders.length > 0) {
      const finite = holders.map((e) => e.expiresAt - now).filter((t) => Number.isFinite(t));
      const held: NodeVote =
        finite.length === holders.length
          ? { ...vote('held'), holderTtl: Math.ceil(Math.max(...finite)) }
          : vote('held');
      return { error: new LockContendedError(detail([held])) };
    }
    const token = randomBytes(20).toString('base64url');
    const fencingTokens = Object.create(null) as Record<string, number>; // '__proto__' is a resource too
    if (this.settings.fencing) {
      for (const r of resources) {
        const next = (this.fences.get(r) ?? 0) + 1;
        this.fences.set(r, next);
        fencingTokens[r] = next;
      }
    }
    const lock = this.createLock({
      resources,
      token,
      ttl,
      start: now,
      wallStart: Date.now(),
      attempts: attemptNo,
      votes: [vote('ok')],
      fencingTokens,
    });
    for (const r of resources) this.entries.set(r, { token, expiresAt: now + ttl, lock });
    return { lock };
  }

  /** The entry of `resource` if it has not expired; drops it otherwise. */
  private live(resource: string, now: number): Entry | undefined {
    const e = this.entries.get(resource);
    if (e && e.expiresAt <= now) {
      this.entries.delete(resource);
      return undefined;
    }
    return e;
  }

  /** Compare-and-delete; nothing is deleted during a simulated outage (the keys expire). */
  protected override async deleteKeys(lock: Lock): Promise<ReleaseResult> {
    if (!this.available) {
      return { deleted: 0, complete: false, votes: [vote('error', 'simulated outage')] };
    }
    let deleted = false;
    for (const r of lock.resources) {
      const e = this.entries.get(r);
      if (e && e.token === lock.value) {
        this.entries.delete(r);
        deleted = true;
      }
    }
    if (deleted) this.wake();
    return { deleted: deleted ? 1 : 0, complete: true, votes: [vote(deleted ? 'ok' : 'held')] };
  }

  /** Waits `ms`, or until a release/free in this engine, or until `signal` aborts. */
  protected override pause(ms: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        stopWatching();
        this.sleepers.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      // One listener per shared signal, however many sleep on it (no MaxListenersExceededWarning).
      const stopWatching = signal ? onAbort(signal, done) : () => undefined;
      this.sleepers.add(done);
    });
  }

  private wake(): void {
    for (const wake of [...this.sleepers]) wake();
  }
}

/**
 * Marks a lock lost now. Reads `lock.signal` first: core's `expire()` aborts only a signal that
 * exists, and a signal first read after the loss would never abort.
 */
function loseNow(lock: Lock, why: string): void {
  void lock.signal;
  expire(lock, lockState(lock), why);
}

const argError = (field: string, problem: string): Error =>
  new InvalidArgumentError(field, problem);

function vote(outcome: NodeOutcome, error?: string): NodeVote {
  return error === undefined
    ? { node: 0, name: NODE_NAME, outcome, latency: 0 }
    : { node: 0, name: NODE_NAME, outcome, latency: 0, error };
}
