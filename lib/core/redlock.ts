import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { delay, monotonicNow } from './clock';
import {
  ExtensionLimitError,
  LockOperationError,
  RedlockError,
  InvalidArgumentError,
  InvalidConfigurationError,
  LockAbortedError,
  LockContendedError,
  LockLostError,
  NoQuorumError,
  ShuttingDownError,
  WaitTimeoutError,
} from './errors';
import type { LockErrorDetail, NodeOutcome, NodeVote } from './errors';
import type { RedlockEvent, RedlockObserver } from './events';
import { ReleaseNotifier } from './handoff';
import type { HandoffTicket } from './handoff';
import { HeldLocks } from './held';
import { fenceKey, lockKey, markerKey } from './keys';
import { Lock, disarm, expire, lockState, mintLock, scheduleExpiry } from './lock';
import type { LockState, ReleaseResult } from './lock';
import { MasterNode, errorMessage, outcomeOf } from './node';
import { clientSecrets, redactorFor } from './redact';
import type { Redactor } from './redact';
import { onAbort } from './wake';
import type { NodeReply } from './node';
import { QuarantineNotice, annotateQuarantined } from './quarantine-notice';
import { ledgerOf, repairMarkerAge, repairStatusOf, repairVote } from './repair';
import type { RepairLedger, RepairStatus } from './repair';
import {
  ACQUIRE_SCRIPT,
  EXTEND_REPAIR_SCRIPT,
  EXTEND_SCRIPT,
  FENCE_RAISE_SCRIPT,
  MARKER_AGE_SCRIPT,
  RELEASE_SCRIPT,
} from './scripts';
import { MAX_TIMER_MS, checkInteger, describe, driftFor, resolveSettings } from './settings';
import type { RedlockClient, RedlockSettings, ResolvedSettings } from './settings';
import { slotGroups } from './slots';
import {
  ACQUIRE_OPTION_NAMES,
  TRY_ACQUIRE_OPTION_NAMES,
  USING_OPTION_NAMES,
  checkBoolean,
  checkDelay,
  checkExtendThreshold,
  checkNames,
  checkObject,
  checkResourceName,
  checkRetryWait,
  checkTtl,
  effectiveThreshold,
} from './validate';

/** Longest accepted resource name, in characters. */
export const MAX_RESOURCE_LENGTH = 1024;
/** Most resources accepted in one lock. */
export const MAX_RESOURCES = 256;

/** Per-call options of {@link Redlock.acquire}. Unset fields fall back to the engine settings. */
export interface AcquireOptions {
  /** Lock time-to-live in ms (integer, at most the `maxTtl` setting). */
  ttl?: number;
  /** Retries after the first attempt. */
  retryCount?: number;
  /** Base delay in ms between attempts. */
  retryDelay?: number;
  /** Random ± spread in ms added to each delay. */
  retryJitter?: number;
  /** Overall deadline in ms: give up with {@link WaitTimeoutError} once it passes. */
  waitTimeout?: number;
  /** Cancels a pending acquire with {@link LockAbortedError}. */
  signal?: AbortSignal;
}

/** Options of {@link Redlock.using}: acquire options plus automatic extension control. */
export interface UsingOptions extends AcquireOptions {
  /** Extend the lock automatically while the routine runs. Default `true`. */
  autoExtend?: boolean;
  /** Extend when the remaining validity falls below this many ms. Default: the engine setting. */
  extendThreshold?: number;
}

/** One master's health, as seen by this engine (see {@link Redlock.health}). */
export interface MasterHealth {
  /** Position in the client list. */
  readonly node: number;
  /** Redacted address. */
  readonly name: string;
  /** Whether the master answered within the request timeout. */
  readonly reachable: boolean;
  /** Round-trip time in ms of the check, when it answered. */
  readonly latency: number | undefined;
  /** Whether the master is in restart quarantine (its votes do not count yet). */
  readonly quarantined: boolean;
  /** While quarantined: at most how many more ms the quarantine lasts (server clock). */
  readonly quarantineRemaining?: number;
  /** Why it is unreachable (never contains credentials). */
  readonly error?: string;
}

/** Health of the whole lock service (see {@link Redlock.health}). */
export interface RedlockHealth {
  /** Votes needed. */
  readonly quorum: number;
  /** Masters that are reachable and not in quarantine. */
  readonly usable: number;
  /** Whether locks can be granted: a quorum of usable masters exists and the engine is not draining. */
  readonly available: boolean;
  /** `true` once the engine stopped taking new locks (`drain()` / `close()`, app shutdown). */
  readonly draining: boolean;
  readonly masters: readonly MasterHealth[];
}

/** Sizes of an engine's internal tables (see {@link Redlock.footprint}). */
export interface RedlockFootprint {
  /** Locks held: granted, not released, not yet expired. */
  readonly heldLocks: number;
  /** Release channels subscribed for waiting acquires (hand-off). */
  readonly handoffChannels: number;
  /** Channels with recently announced releases remembered for de-duplication. */
  readonly handoffRecent: number;
  /** Acquires registered with the hand-off notifier (retrying after contention). */
  readonly handoffWaiters: number;
}

/** The routine run by {@link Redlock.using}. */
export type LockedRoutine<T> = (signal: AbortSignal, lock: Lock) => Promise<T> | T;

/** A checked acquire request (engine implementations receive it in `attemptOnce`). */
export interface AcquireRequest extends CheckedAcquire {
  /** Redis keys of `resources`. */
  readonly keys: readonly string[];
}

type Request = AcquireRequest;

/** The outcome of one attempt: a lock, or why not (and the clean-up still running). */
export type AttemptResult =
  | { readonly lock: Lock; readonly cleanup?: undefined }
  | {
      readonly lock?: undefined;
      /** The clean-up of the failed attempt, while it runs. */
      readonly cleanup?: Promise<void>;
      readonly error: LockContendedError | NoQuorumError;
    };

/** A script's reply for one group of resources (one slot on a Cluster master). */
interface GroupReply {
  readonly resources: readonly string[];
  readonly value: unknown;
}

/** One voting round; `decided` once its outcome is known (late answers are ignored). */
interface Round {
  decided: boolean;
}

interface Tally {
  readonly votes: NodeVote[];
  readonly replies: (NodeReply | undefined)[];
  readonly ok: number;
}

/**
 * The Redlock algorithm on N independent Redis masters (see REDLOCK.md).
 *
 * Framework-free: give it ioredis clients, one per master. The engine never closes them;
 * {@link close} only drops what the engine itself created (subscriber connections, listeners).
 */
export class Redlock {
  /** The validated settings in force. */
  readonly settings: ResolvedSettings;
  /** Votes needed for a decision. */
  readonly quorum: number;
  private readonly nodes: readonly MasterNode[];
  private readonly notifier: ReleaseNotifier;
  private readonly held = new HeldLocks();
  /** Removes credentials — also the known passwords of the clients — from texts it reports. */
  private readonly redact: Redactor;
  private readonly observers = new Set<RedlockObserver>();
  private readonly markerKey: string;
  /** Tells the logger, once per master, why it is in restart quarantine and for how long. */
  private readonly quarantineNotice: QuarantineNotice;
  private closed = false;
  /** Aborted by {@link drain}: refuses new acquisitions and wakes the waiting ones. */
  private readonly draining = new AbortController();

  constructor(clients: readonly RedlockClient[], settings: RedlockSettings = {}) {
    if (!Array.isArray(clients) || clients.length === 0) {
      throw new InvalidConfigurationError('clients', 'at least one Redis client is required');
    }
    clients.forEach((c, i) => {
      const candidate = c as Partial<Redis> | null;
      if (
        !candidate ||
        typeof candidate.evalsha !== 'function' ||
        typeof candidate.on !== 'function'
      ) {
        throw new InvalidConfigurationError(
          `clients[${i}]`,
          `must be an ioredis Redis or Cluster instance, got ${describe(c)}`,
        );
      }
    });
    if (new Set(clients).size !== clients.length) {
      throw new InvalidConfigurationError('clients', 'the same client instance is listed twice');
    }
    this.settings = resolveSettings(settings, clients.length);
    this.quorum = this.settings.quorum;
    const { logger, keyPrefix, quarantine } = this.settings;
    if (clients.length < 3) {
      logger.warn(
        `Redlock: only ${clients.length} master(s); a single failure makes locking unavailable. Use 3 or 5 independent masters.`,
      );
    } else if (clients.length % 2 === 0) {
      logger.warn(
        `Redlock: ${clients.length} masters is an even count; ${clients.length + 1} would tolerate one more failure at no extra quorum cost.`,
      );
    }
    if (this.quorum <= clients.length / 2) {
      logger.warn(
        `Redlock: quorum ${this.quorum} of ${clients.length} is not a majority; two holders can own the same lock at once.`,
      );
    }
    this.redact = redactorFor(clients.flatMap((c) => clientSecrets(c)));
    this.markerKey = markerKey(keyPrefix);
    this.quarantineNotice = new QuarantineNotice(logger, this.settings.requestTimeout);
    this.nodes = clients.map(
      (c, i) =>
        new MasterNode(i, c, this.markerKey, quarantine, logger, this.redact, (node, seed) =>
          this.quarantineNotice.note(node, quarantine.duration - seed.age, seed.cause),
        ),
    );
    this.notifier = new ReleaseNotifier(this.nodes, logger, this.settings.requestTimeout);
  }

  /** Number of masters. */
  get masterCount(): number {
    return this.nodes.length;
  }

  /** Redacted addresses of the masters, in order. */
  get masterNames(): readonly string[] {
    return this.nodes.map((n) => n.name);
  }

  /**
   * Locks acquired by this engine and not yet released. A lock left to expire leaves the list
   * shortly after its validity ended (at most about 50 ms later, or at the next read of its
   * signal).
   */
  get heldLocks(): readonly Lock[] {
    return this.held.list();
  }

  /**
   * Sizes of the engine's internal tables — for diagnostics and leak checks: in a long-running
   * process they follow the current load and return to zero when it stops.
   */
  get footprint(): RedlockFootprint {
    const handoff = this.notifier.footprint;
    return {
      heldLocks: this.held.size,
      handoffChannels: handoff.channels,
      handoffRecent: handoff.recent,
      handoffWaiters: handoff.acquirers,
    };
  }

  /**
   * Subscribes to engine events (acquired, failed, extended, released, lost) — for metrics, logs
   * and tracing. Costs nothing while nobody observes. Returns a function that unsubscribes.
   */
  observe(observer: RedlockObserver): () => void {
    if (typeof observer !== 'function')
      throw new InvalidArgumentError('observer', 'must be a function');
    this.observers.add(observer);
    return () => this.observers.delete(observer);
  }

  /**
   * Redis key of a resource's lock: `${keyPrefix}{resource}` (the hash tag keeps a resource's
   * keys in one Cluster slot); a resource containing `}` gets a derived tag (see keys.ts).
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
  async acquire(
    resources: string | readonly string[],
    options: AcquireOptions = {},
  ): Promise<Lock> {
    const req = this.prepare(resources, options);
    const started = monotonicNow();
    try {
      return this.granted(await this.acquireLoop(req, started), started);
    } catch (err) {
      this.emitFailed(req.resources, err, started);
      throw err;
    }
  }

  private async acquireLoop(req: Request, start: number): Promise<Lock> {
    const deadline = req.waitTimeout === undefined ? Infinity : start + req.waitTimeout;
    let attempts = 0;
    let ticket: HandoffTicket | undefined;
    let last: AttemptResult | undefined;
    const detail = (): LockErrorDetail => ({
      resources: req.resources,
      votes: last?.lock ? [] : (last?.error.votes ?? []),
      attempts,
      elapsed: monotonicNow() - start,
    });
    try {
      for (;;) {
        if (req.signal?.aborted) {
          await last?.cleanup;
          throw new LockAbortedError(detail(), { cause: req.signal.reason });
        }
        if (this.draining.signal.aborted) {
          await last?.cleanup;
          throw new ShuttingDownError(detail());
        }
        attempts++;
        last = await this.attemptOnce(req, attempts, start);
        if (last.lock) return last.lock;
        const left = deadline - monotonicNow();
        if (attempts > req.retryCount) break;
        if (left <= 0) {
          await last.cleanup;
          throw new WaitTimeoutError(
            { ...detail(), waitTimeout: req.waitTimeout ?? 0 },
            { cause: last.error },
          );
        }
        const contended = last.error instanceof LockContendedError;
        if (contended && this.settings.handoff && !ticket) {
          // Listen for the holder's release, then retry at once: a release that happened
          // before the subscription became active cannot be missed.
          const subscription = await this.notifier.subscribe(req.keys, start);
          ticket = subscription.ticket;
          if (subscription.fresh) continue;
        }
        let wait = req.retryDelay + (Math.random() * 2 - 1) * req.retryJitter;
        const holderTtl = contended ? (last.error as LockContendedError).retryAfter : undefined;
        if (holderTtl !== undefined) wait = Math.min(wait, holderTtl + 1);
        wait = Math.max(0, Math.min(wait, left, MAX_TIMER_MS));
        const waking = this.wakeSignal(req.signal);
        try {
          if (ticket) {
            await ticket.wait(wait, waking.signal);
          } else {
            await this.pause(wait, waking.signal);
          }
        } finally {
          waking.dispose();
        }
      }
      await last.cleanup;
      throw last.error;
    } finally {
      ticket?.done();
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
    const req = {
      ...this.prepare(resources, options, TRY_ACQUIRE_OPTION_NAMES),
      retryCount: 0,
      waitTimeout: undefined,
    };
    if (req.signal?.aborted) {
      throw new LockAbortedError(
        { resources: req.resources, votes: [], attempts: 0, elapsed: 0 },
        { cause: req.signal.reason },
      );
    }
    const started = monotonicNow();
    const result = await this.attemptOnce(req, 1, started);
    if (result.lock) return this.granted(result.lock, started);
    await result.cleanup;
    this.emitFailed(req.resources, result.error, started);
    if (result.error instanceof LockContendedError) return null;
    throw result.error;
  }

  private granted(lock: Lock, started: number): Lock {
    if (this.observers.size > 0) {
      this.emit({
        type: 'acquired',
        resources: lock.resources,
        lock,
        attempts: lock.attempts,
        waitTime: monotonicNow() - started,
        votes: lock.votes,
      });
    }
    return lock;
  }

  /** Reports a failed acquire to the observers. */
  protected emitFailed(resources: readonly string[], err: unknown, started: number): void {
    if (this.observers.size === 0 || !(err instanceof RedlockError)) return;
    const detail = err instanceof LockOperationError ? err : undefined;
    this.emit({
      type: 'failed',
      resources,
      error: err,
      attempts: detail?.attempts ?? 0,
      waitTime: monotonicNow() - started,
      votes: detail?.votes ?? [],
    });
  }

  /** Tells every observer about `event`; an observer that throws is logged, never fatal. */
  protected emit(event: RedlockEvent): void {
    for (const observer of this.observers) {
      try {
        observer(event);
      } catch (err) {
        this.settings.logger.warn(`Redlock: an observer threw: ${this.redact(errorMessage(err))}`);
      }
    }
  }

  /**
   * Releases a lock: compare-and-delete on **every** master, each bounded by the request timeout.
   * Resolves as soon as a majority answered (the lock is then free for others; the remaining
   * masters' deletes are already on their way, `pending` in the votes). Never throws because
   * the lock expired.
   */
  release(lock: Lock): Promise<ReleaseResult> {
    return this.releaseLock(lock, false);
  }

  private async releaseLock(lock: Lock, waitAll: boolean): Promise<ReleaseResult> {
    const s = this.stateOf(lock);
    if (!s.released && s.validUntil <= monotonicNow()) {
      expire(lock, s, 'its validity ended before it was released');
    }
    s.released = true;
    disarm(s);
    this.held.delete(lock);
    const start = monotonicNow();
    const result = await this.deleteKeys(lock, waitAll);
    if (this.observers.size > 0) {
      const end = monotonicNow();
      this.emit({
        type: 'released',
        resources: lock.resources,
        lock,
        holdTime: end - s.acquiredAt,
        duration: end - start,
        result,
      });
    }
    return result;
  }

  /**
   * Extends a lock to `ttl` ms from now (default: its current ttl) with compare-and-pexpire on
   * every master. Succeeds only when a quorum accepts within the remaining validity. With the
   * `repairOnExtend` setting (default) it also puts the key back (`SET NX`, same token) on
   * masters that lost it; those do not count toward the quorum (see repair.ts). Throws {@link LockLostError} when the lock is gone,
   * {@link NoQuorumError} when too few masters answered in time (the lock keeps its old validity),
   * {@link ExtensionLimitError} past `maxExtensions`.
   */
  async extend(lock: Lock, ttl?: number): Promise<Lock> {
    const s = this.stateOf(lock);
    const newTtl = ttl === undefined ? s.ttl : this.checkTtl(ttl);
    const detail = (votes: readonly NodeVote[], elapsed = 0): LockErrorDetail => ({
      resources: lock.resources,
      votes,
      attempts: 1,
      elapsed,
    });
    if (s.released) throw new LockLostError(detail(s.votes), 'it was released');
    if (s.extensions >= this.settings.maxExtensions) {
      throw new ExtensionLimitError({
        ...detail(s.votes),
        maxExtensions: this.settings.maxExtensions,
      });
    }
    const start = monotonicNow();
    const remaining = s.validUntil - start;
    if (remaining <= 0) {
      expire(lock, s, 'validity ended before the extension');
      throw new LockLostError(detail(s.votes), 'its validity ended before the extension');
    }
    const wallStart = Date.now();
    const timeout = Math.min(this.settings.requestTimeout, remaining);
    const keys = lock.resources.map((r) => this.keyOf(r));
    const args = [lock.value, String(newTtl)];
    const ledger = this.settings.repairOnExtend ? ledgerOf(lock, this.nodes.length) : undefined;
    const tally = ledger
      ? await this.repairingRound(lock, s, ledger, newTtl, timeout)
      : await this.vote(
          (node) =>
            this.runGrouped(node, lock.resources, keys, (groupKeys) =>
              node.evalScript(EXTEND_SCRIPT, groupKeys, args),
            ),
          (value) => (allGroups(value, (v) => v === 1) ? 'ok' : 'held'),
          timeout,
        );
    const end = monotonicNow();
    const validity = newTtl - (end - start) - driftFor(newTtl, this.settings.driftFactor);
    if (tally.ok >= this.quorum && end < s.validUntil && validity > 0) {
      ledger?.confirm();
      return this.extended(lock, { ttl: newTtl, start, wallStart, end, votes: tally.votes });
    }
    // Masters that cannot count before this lock's next successful extension: another holder's
    // key, or ours put back since the last one (repair.ts, rule 2).
    const held = tally.votes.filter((v) => v.outcome === 'held' || v.outcome === 'repaired').length;
    if (this.nodes.length - held < this.quorum) {
      expire(lock, s, 'a majority of masters no longer hold it');
      if (ledger) await this.undoRepairs(lock, tally);
      throw new LockLostError(
        detail(tally.votes, end - start),
        'a majority of masters no longer hold it',
      );
    }
    if (end >= s.validUntil) {
      expire(lock, s, 'validity ended during the extension');
      if (ledger) await this.undoRepairs(lock, tally);
      throw new LockLostError(
        detail(tally.votes, end - start),
        'its validity ended during the extension',
      );
    }
    throw new NoQuorumError({
      ...detail(tally.votes, end - start),
      reason: tally.ok >= this.quorum ? 'validity-exhausted' : 'unavailable',
      quorum: this.quorum,
    });
  }

  /**
   * One round of a repairing extension (repair.ts): compare-and-pexpire where the key is ours,
   * `SET NX` where it is missing, on every master — sent after the master's post-connect check
   * like an acquire, never once the lock is released or lost. Only masters that kept the key,
   * had no repair since the lock was last confirmed, and are out of restart quarantine vote `ok`.
   */
  private async repairingRound(
    lock: Lock,
    s: LockState,
    ledger: RepairLedger,
    ttl: number,
    timeout: number,
  ): Promise<Tally> {
    const keys = lock.resources.map((r) => this.keyOf(r));
    const duration = this.settings.quarantine.duration;
    const wanted = (): boolean => !s.released && !s.lostReason;
    const statusOf = (value: unknown): RepairStatus =>
      repairStatusOf((value as GroupReply[]).map((g) => g.value));
    const tally = await this.vote(
      (node, i) =>
        ledger.track(
          i,
          this.afterCheck(node, wanted, () =>
            this.runGrouped(node, lock.resources, keys, (groupKeys) => {
              const marker = node.checksMarker;
              return node.evalScript(
                EXTEND_REPAIR_SCRIPT,
                marker ? [...groupKeys, this.markerKey] : groupKeys,
                [lock.value, String(ttl), marker ? '1' : '0', String(groupKeys.length)],
                wanted,
              );
            }),
          ),
          statusOf,
        ),
      (value, node) => {
        const age = repairMarkerAge((value as GroupReply[]).map((g) => g.value));
        const young = node.checksMarker && age !== undefined && age < duration;
        return repairVote(statusOf(value), ledger.counts(node.index), young);
      },
      timeout,
    );
    if (tally.votes.some((v) => v.outcome === 'quarantined')) {
      annotateQuarantined(
        tally.votes,
        (i) => {
          const reply = tally.replies[i];
          return reply?.kind === 'reply'
            ? repairMarkerAge((reply.value as GroupReply[]).map((g) => g.value))
            : undefined;
        },
        duration,
        this.quarantineNotice,
      );
      this.quarantineNotice.flush();
    }
    return tally;
  }

  /**
   * A repairing extension found the lock lost: deletes (compare-and-delete of its token) the keys
   * this round put back — only on masters whose reply says the key was missing and was set now —
   * so that a lost lock does not block the resource where it had already disappeared. Deleting
   * there only restores what the masters held before the round. Every other master is left as a
   * plain extension leaves it: where our key may have been kept (the master answered `ok`, or
   * late, or with an error, or was put back by an earlier round), deleting it could open the
   * resource to a contender while the holder, told a moment ago, is still winding down inside the
   * validity it was given; such keys expire within their ttl or go with the holder's release.
   */
  private async undoRepairs(lock: Lock, tally: Tally): Promise<void> {
    const repairedNow = this.nodes.filter((_, i) => {
      const reply = tally.replies[i];
      if (reply?.kind !== 'reply') return false;
      try {
        return repairStatusOf((reply.value as GroupReply[]).map((g) => g.value)) === 'repaired';
      } catch {
        return false;
      }
    });
    if (repairedNow.length === 0) return;
    await this.releaseKeys(lock.resources, lock.value, {
      only: repairedNow,
      waitAll: true,
      announce: true,
    });
  }

  /**
   * Acquires, runs `routine(signal, lock)`, extends the lock automatically before it expires and
   * always releases. `signal` aborts (reason: {@link LockLostError}) at the local validity
   * deadline or as soon as an extension fails. A release error never masks the routine's result or
   * error (it goes to the logger). No timer outlives the call.
   */
  async using<T>(
    resources: string | readonly string[],
    routine: LockedRoutine<T>,
    options: UsingOptions = {},
  ): Promise<T> {
    if (typeof routine !== 'function')
      throw new InvalidArgumentError('routine', `must be a function, got ${describe(routine)}`);
    checkObject('options', options, argError);
    checkNames(options, USING_OPTION_NAMES, argError, '', 'option');
    const { autoExtend = true, extendThreshold, ...acquireOptions } = options;
    checkBoolean('autoExtend', autoExtend, argError);
    const ttl = checkAcquire(resources, acquireOptions, this.settings).ttl;
    const threshold =
      extendThreshold === undefined
        ? undefined
        : checkExtendThreshold('extendThreshold', extendThreshold, ttl, argError);
    const lock = await this.acquire(resources, acquireOptions);
    const stop = autoExtend ? this.keepAlive(lock, threshold) : () => undefined;
    try {
      return await routine(lock.signal, lock);
    } finally {
      stop();
      await this.release(lock).then(
        (r) => {
          if (!r.complete)
            this.settings.logger.debug?.(
              `Redlock: release of ${lock.resources.join(', ')} incomplete`,
            );
        },
        (err: unknown) =>
          this.settings.logger.warn(`Redlock: release failed: ${this.redact(errorMessage(err))}`),
      );
    }
  }

  /**
   * Starts extending `lock` before it expires (bounded by `maxExtensions`); the lock's signal
   * aborts when an extension fails. Returns a function that stops it. Used by {@link using} and
   * by the Nest layer.
   */
  keepAlive(lock: Lock, extendThreshold?: number): () => void {
    const s = this.stateOf(lock);
    if (extendThreshold !== undefined) {
      checkInteger('extendThreshold', extendThreshold, 1, MAX_TIMER_MS, argError);
    }
    const signal = lock.signal; // arms the expiry timer that aborts at the validity deadline
    let timer: NodeJS.Timeout | undefined;
    let stopped = false;
    const arm = (): void => {
      if (stopped || signal.aborted || s.released) return;
      if (s.extensions >= this.settings.maxExtensions) return; // the expiry timer aborts at the deadline
      // At most half the lock's ttl, so that extensions never run back to back.
      const threshold = effectiveThreshold(s.ttl, extendThreshold ?? this.settings.extendThreshold);
      const left = s.validUntil - monotonicNow();
      timer = setTimeout(run, Math.max(0, left - threshold));
    };
    let retries = 0;
    const run = (): void => {
      timer = undefined;
      if (stopped) return;
      this.extend(lock).then(
        () => {
          retries = 0;
          arm();
        },
        (err: unknown) => {
          if (stopped) return;
          // Too few masters answered in time (a slow moment, not a lost lock): the lock keeps its
          // validity, so try again — twice at most, and only while a retry can still finish in
          // time. Anything else ends the lock at once.
          const left = s.validUntil - monotonicNow();
          if (
            err instanceof NoQuorumError &&
            retries < 2 &&
            left > 2 * this.settings.requestTimeout
          ) {
            retries++;
            timer = setTimeout(run, Math.min(this.settings.retryDelay / 4, left / 4));
            return;
          }
          expire(lock, s, `extension failed: ${errorMessage(err)}`, err);
        },
      );
    };
    arm();
    return () => {
      stopped = true;
      if (timer) clearTimeout(timer);
    };
  }

  /**
   * Checks every master (one read-only script each, bounded by the request timeout): reachable,
   * latency, restart quarantine; and whether a quorum is available. Names are redacted.
   */
  async health(): Promise<RedlockHealth> {
    const marker = `${this.settings.keyPrefix}boot`;
    const { duration } = this.settings.quarantine;
    const masters = await Promise.all(
      this.nodes.map(async (node): Promise<MasterHealth> => {
        const checks = node.checksMarker;
        const reply = await node.request(
          () => (checks ? node.evalScript(MARKER_AGE_SCRIPT, [marker], []) : node.client.ping()),
          this.settings.requestTimeout,
        );
        const base = { node: node.index, name: node.name };
        if (reply.kind !== 'reply') {
          const error =
            reply.kind === 'timeout' ? 'no answer within the request timeout' : reply.error;
          return { ...base, reachable: false, latency: undefined, quarantined: false, error };
        }
        const age = typeof reply.value === 'number' ? reply.value : -1;
        // A missing marker (-1) means the next acquire starts the quarantine: all of it is left.
        const quarantined = checks && age < duration;
        return {
          ...base,
          reachable: true,
          latency: Math.round(reply.latency * 100) / 100,
          quarantined,
          ...(quarantined ? { quarantineRemaining: duration - Math.max(0, age) } : {}),
        };
      }),
    );
    const usable = masters.filter((m) => m.reachable && !m.quarantined).length;
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
    const locks = this.held.list();
    // A lock released by shutdown stops protecting its holder, who may still be running (a
    // `using()` routine, a locked call past the shutdown timeout): its signal aborts first —
    // before any key is deleted and another process can take the resource.
    for (const lock of locks) {
      const s = lockState(lock);
      if (!s.released) expire(lock, s, 'the engine was closed (shutdown) while it was held');
    }
    // Wait for every master's answer (not just a majority): the caller closes the clients next.
    await Promise.all(locks.map((l) => this.releaseLock(l, true).catch(() => undefined)));
    this.held.stop();
    await this.notifier.close();
    this.quarantineNotice.close();
    for (const n of this.nodes) n.detach();
  }

  // ---------------------------------------------------------------------------------------------

  /**
   * Waits `ms` between attempts (or until `signal` aborts) when no release channel is listened
   * to. Never rejects. An engine with its own wake-ups (the in-memory one) overrides it.
   */
  protected pause(ms: number, signal?: AbortSignal): Promise<void> {
    return delay(ms, signal).catch(() => undefined);
  }

  /** Deletes a lock's keys (compare-and-delete) on the masters: the storage step of a release. */
  protected deleteKeys(lock: Lock, waitAll: boolean): Promise<ReleaseResult> {
    return this.releaseKeys(lock.resources, lock.value, { waitAll, announce: true });
  }

  /**
   * Records a successful extension (validity from `start`, the time the extension was sent),
   * re-arms the expiry timer and reports it. Shared by every engine's `extend`.
   */
  protected extended(
    lock: Lock,
    x: { ttl: number; start: number; wallStart: number; end: number; votes: readonly NodeVote[] },
  ): Lock {
    const s = this.stateOf(lock);
    const drift = driftFor(x.ttl, this.settings.driftFactor);
    s.validUntil = x.start + x.ttl - drift;
    s.expiresAt = x.wallStart + x.ttl - drift;
    s.ttl = x.ttl;
    s.extensions++;
    s.votes = x.votes;
    scheduleExpiry(lock, s);
    if (this.observers.size > 0) {
      this.emit({
        type: 'extended',
        resources: lock.resources,
        lock,
        ttl: x.ttl,
        extensions: s.extensions,
        duration: x.end - x.start,
      });
    }
    return lock;
  }

  /**
   * Builds a granted lock and tracks it (held locks, 'lost' events). `start` is the monotonic
   * time at which the attempt began: validity runs from there.
   */
  protected createLock(init: {
    resources: readonly string[];
    token: string;
    ttl: number;
    start: number;
    wallStart: number;
    attempts: number;
    votes: readonly NodeVote[];
    fencingTokens: Readonly<Record<string, number>>;
  }): Lock {
    const drift = driftFor(init.ttl, this.settings.driftFactor);
    const state: LockState = {
      validUntil: init.start + init.ttl - drift,
      expiresAt: init.wallStart + init.ttl - drift,
      ttl: init.ttl,
      extensions: 0,
      released: false,
      votes: init.votes,
      acquiredAt: init.start,
    };
    const lock = mintLock(this, {
      resources: init.resources,
      value: init.token,
      attempts: init.attempts,
      fencingTokens: init.fencingTokens,
      state,
    });
    state.onLost = (reason) => {
      if (this.observers.size > 0) {
        this.emit({
          type: 'lost',
          resources: lock.resources,
          lock,
          holdTime: monotonicNow() - state.acquiredAt,
          reason,
        });
      }
    };
    this.held.add(lock);
    if (this.observers.size > 0) {
      // Report a loss when it happens (not only when the holder next touches the lock).
      state.watched = true;
      scheduleExpiry(lock, state);
    }
    return lock;
  }

  /**
   * One attempt on the masters (REDLOCK.md, "N masters", steps 1–5): a lock, or the reason it
   * was not granted, with the clean-up of a failed attempt already sent.
   */
  protected async attemptOnce(
    req: AcquireRequest,
    attemptNo: number,
    startedAt: number,
  ): Promise<AttemptResult> {
    const { ttl } = req;
    const drift = driftFor(ttl, this.settings.driftFactor);
    const token = newToken();
    const fencing = this.settings.fencing;
    const start = monotonicNow();
    const wallStart = Date.now();
    const timeout = Math.max(1, Math.min(this.settings.requestTimeout, ttl - drift));
    const duration = this.settings.quarantine.duration;
    const ttlArg = String(ttl);
    const fenceTtlArg = String(this.settings.fencingKeyTtl);
    // Script keys, built once per attempt: lock keys, fencing counters, then the boot marker.
    const withFences = (keys: readonly string[], resources: readonly string[]): string[] =>
      fencing ? [...keys, ...resources.map((r) => this.fenceKeyOf(r))] : [...keys];
    const allKeys = withFences(req.keys, req.resources);
    const allKeysWithMarker = [...allKeys, this.markerKey];
    // A master that lost its scripts answers NOSCRIPT and gets an EVAL afterwards. That EVAL
    // must never land after this token's release on the same connection: it is sent only while
    // the attempt has not failed (its clean-up not yet sent) and its lock is not released.
    let failed = false;
    let granted: Lock | undefined;
    const stillWanted = (): boolean => !failed && !granted?.released;
    const tally = await this.vote(
      (node) =>
        this.afterCheck(node, stillWanted, () =>
          this.runGrouped(node, req.resources, req.keys, (keys, resources) => {
            const marker = node.checksMarker;
            const scriptKeys =
              resources !== req.resources
                ? withFences(keys, resources) // one slot group of a Cluster master
                : marker
                  ? allKeysWithMarker
                  : allKeys;
            return node.evalScript(
              ACQUIRE_SCRIPT,
              scriptKeys,
              [
                token,
                ttlArg,
                fencing ? '1' : '0',
                marker ? '1' : '0',
                String(resources.length),
                fenceTtlArg,
              ],
              stillWanted,
            );
          }),
        ),
      (value, node) => {
        const groups = (value as GroupReply[]).map((g) => g.value as unknown[]);
        if (!groups.every((g) => g[0] === 1)) return 'held';
        const young = groups.some((g) => typeof g[1] === 'number' && g[1] >= 0 && g[1] < duration);
        return node.checksMarker && young ? 'quarantined' : 'ok';
      },
      timeout,
      (value) => {
        const held = (value as GroupReply[])
          .map((g) => g.value as unknown[])
          .find((g) => g[0] === 0);
        return typeof held?.[2] === 'number' && held[2] >= 0 ? held[2] : undefined;
      },
    );
    if (tally.votes.some((v) => v.outcome === 'quarantined')) {
      annotateQuarantined(
        tally.votes,
        (i) => markerAge(tally.replies[i]),
        duration,
        this.quarantineNotice,
      );
      this.quarantineNotice.flush();
    }
    const detail = (): LockErrorDetail => ({
      resources: req.resources,
      votes: tally.votes,
      attempts: attemptNo,
      elapsed: monotonicNow() - startedAt,
    });
    const fail = async (error: LockContendedError | NoQuorumError): Promise<AttemptResult> => {
      failed = true; // from here on, no late EVAL fallback may follow the clean-up
      // Undo on every master that may hold our token: all but those that answered "held" (the
      // script is all-or-nothing there; on a Cluster master a slot group may have succeeded).
      const maybeSet = this.nodes.filter((n, i) => n.cluster || tally.votes[i].outcome !== 'held');
      // Sent now, in order on each master's connection, so it runs before any later attempt;
      // awaited only before the failure is surfaced to the caller.
      const cleanup =
        maybeSet.length > 0
          ? this.releaseKeys(req.resources, token, { only: maybeSet, announce: false }).then(
              () => undefined,
            )
          : undefined;
      return {
        error,
        cleanup,
      };
    };
    if (tally.ok < this.quorum) {
      // Contended when someone holds it and the masters that did not fail (answered, or not yet
      // answered when the outcome became certain) could have made a quorum had it been free:
      // waiting for the holder would help. Otherwise it is an outage.
      const held = tally.votes.filter((v) => v.outcome === 'held').length;
      const unusable = tally.votes.filter((v) => UNUSABLE.has(v.outcome)).length;
      return fail(
        held > 0 && this.nodes.length - unusable >= this.quorum
          ? new LockContendedError(detail())
          : new NoQuorumError({ ...detail(), reason: 'unavailable', quorum: this.quorum }),
      );
    }
    const exhausted = (): boolean => ttl - (monotonicNow() - start) - drift <= 0;
    let fencingTokens: Record<string, number> = {};
    if (fencing && !exhausted()) {
      const tokens = await this.settleFencing(req.resources, tally, start + ttl - drift);
      if (!tokens && !exhausted()) {
        return fail(new NoQuorumError({ ...detail(), reason: 'unavailable', quorum: this.quorum }));
      }
      fencingTokens = tokens ?? {};
    }
    if (exhausted()) {
      return fail(
        new NoQuorumError({ ...detail(), reason: 'validity-exhausted', quorum: this.quorum }),
      );
    }
    const lock = (granted = this.createLock({
      resources: req.resources,
      token,
      ttl,
      start,
      wallStart,
      attempts: attemptNo,
      votes: tally.votes,
      fencingTokens,
    }));
    return { lock };
  }

  /**
   * Fencing tokens: the largest counter per resource over the masters that granted the lock. When
   * the masters already at that value do not form a quorum, raise the counters on every master
   * (set-if-greater) and wait for a quorum to confirm, so that any later quorum sees at least it.
   */
  private async settleFencing(
    resources: readonly string[],
    tally: Tally,
    validUntil: number,
  ): Promise<Record<string, number> | null> {
    const counters = tally.replies.map((reply) =>
      reply?.kind === 'reply' ? countersOf(reply.value as GroupReply[], resources) : undefined,
    );
    const max = resources.map((_, j) => {
      let m = 0;
      for (const c of counters) if (c && c[j] > m) m = c[j];
      return m;
    });
    const atMax = (c: number[] | undefined): boolean => !!c && c.every((v, j) => v === max[j]);
    // No prototype: a resource named '__proto__' or 'constructor' is a key like any other.
    const tokens = Object.create(null) as Record<string, number>;
    resources.forEach((r, j) => (tokens[r] = max[j]));
    if (counters.filter(atMax).length >= this.quorum) return tokens;
    const left = validUntil - monotonicNow();
    if (left <= 0) return null;
    const raised = await this.vote(
      (node, i) =>
        atMax(counters[i])
          ? Promise.resolve(1)
          : this.runGrouped(node, resources, [], (_keys, group) =>
              node.evalScript(
                FENCE_RAISE_SCRIPT,
                group.map((r) => this.fenceKeyOf(r)),
                [String(this.settings.fencingKeyTtl), ...group.map((r) => String(tokens[r]))],
              ),
            ),
      () => 'ok',
      Math.min(this.settings.requestTimeout, left),
    );
    return raised.ok >= this.quorum ? tokens : null;
  }

  private fenceKeyOf(resource: string): string {
    return fenceKey(this.settings.keyPrefix, resource);
  }

  /**
   * Compare-and-delete of `token` on the masters (`only` those, when given). `announce` publishes
   * the release for waiters (hand-off): true for the release of a granted lock, false for the
   * clean-up of a failed attempt — announcing that would wake the failed acquirer itself (or a
   * rival that split the votes with it) at once, turning the random retry delay into a hot loop.
   */
  private async releaseKeys(
    resources: readonly string[],
    token: string,
    options: { only?: readonly MasterNode[]; waitAll?: boolean; announce: boolean },
  ): Promise<ReleaseResult> {
    const { only, waitAll = false } = options;
    const keys = resources.map((r) => this.keyOf(r));
    const args = [token, this.settings.handoff && options.announce ? '1' : '0'];
    const nothing: GroupReply[] = [{ resources, value: 0 }];
    const tally = await this.vote(
      (node) =>
        only && !only.includes(node)
          ? Promise.resolve(nothing)
          : this.runGrouped(node, resources, keys, (groupKeys) =>
              node.evalScript(RELEASE_SCRIPT, groupKeys, args),
            ),
      (value) => (allGroups(value, (v) => v === 0) ? 'held' : 'ok'),
      this.settings.requestTimeout,
      undefined,
      !waitAll,
    );
    return {
      deleted: tally.ok,
      complete: tally.votes.every((v) => v.outcome === 'ok' || v.outcome === 'held'),
      votes: tally.votes,
    };
  }

  /**
   * Sends one request per master in parallel and tallies the votes. Resolves as soon as the
   * outcome is certain (a quorum of `ok`, or too many other answers for a quorum) unless
   * `waitAll`; unanswered masters are then recorded as `pending`.
   */
  private vote(
    send: (node: MasterNode, index: number, round: Round) => Promise<unknown>,
    judge: (value: unknown, node: MasterNode) => NodeOutcome,
    timeout: number,
    holderTtlOf?: (value: unknown) => number | undefined,
    earlyExit = true,
  ): Promise<Tally> {
    const nodes = this.nodes;
    const n = nodes.length;
    const quorum = this.quorum;
    const votes: NodeVote[] = new Array<NodeVote>(n);
    const replies: (NodeReply | undefined)[] = new Array<NodeReply | undefined>(n).fill(undefined);
    const round: Round = { decided: false };
    const start = monotonicNow();
    let ok = 0;
    let notOk = 0;
    return new Promise<Tally>((resolve) => {
      const finish = (): void => {
        if (round.decided) return;
        round.decided = true;
        clearTimeout(timer);
        for (let i = 0; i < n; i++) {
          votes[i] ??= { node: i, name: nodes[i].name, outcome: 'pending', latency: 0 };
        }
        resolve({ votes, replies, ok });
      };
      // One timer for the whole round: every master gets the same per-node timeout.
      const timer = setTimeout(
        () => {
          const latency = monotonicNow() - start;
          for (let i = 0; i < n; i++) {
            if (replies[i]) continue;
            replies[i] = { kind: 'timeout', latency };
            votes[i] = {
              node: i,
              name: nodes[i].name,
              outcome: 'timeout',
              latency: round2(latency),
            };
          }
          finish();
        },
        Math.max(1, timeout),
      );
      const record = (i: number, reply: NodeReply): void => {
        if (round.decided) return;
        replies[i] = reply;
        const node = nodes[i];
        const outcome = reply.kind === 'reply' ? judge(reply.value, node) : outcomeOf(reply);
        const vote: { -readonly [K in keyof NodeVote]: NodeVote[K] } = {
          node: i,
          name: node.name,
          outcome,
          latency: round2(reply.latency),
        };
        if (reply.kind === 'error') vote.error = reply.error;
        if (outcome === 'held' && reply.kind === 'reply' && holderTtlOf) {
          const ttl = holderTtlOf(reply.value);
          if (ttl !== undefined) vote.holderTtl = ttl;
        }
        votes[i] = vote;
        if (outcome === 'ok') ok++;
        else notOk++;
        if (ok + notOk === n || (earlyExit && (ok >= quorum || n - notOk < quorum))) finish();
      };
      for (let i = 0; i < n; i++) {
        let sent: Promise<unknown>;
        try {
          sent = send(nodes[i], i, round);
        } catch (err) {
          sent = Promise.reject(err);
        }
        sent.then(
          (value) => record(i, { kind: 'reply', value, latency: monotonicNow() - start }),
          (err: unknown) =>
            record(i, {
              kind: 'error',
              error: this.redact(errorMessage(err)),
              latency: monotonicNow() - start,
            }),
        );
      }
    });
  }

  /**
   * Runs `run` once per group of keys that may share a script on this master: one group on a
   * standalone master, one per hash slot on a Cluster. Resolves with the list of group replies.
   */
  private runGrouped(
    node: MasterNode,
    resources: readonly string[],
    keys: readonly string[],
    run: (keys: readonly string[], resources: readonly string[]) => Promise<unknown>,
  ): Promise<GroupReply[]> {
    if (!node.cluster) return run(keys, resources).then((value) => [{ resources, value }]);
    const groups = slotGroups(resources, (r) => this.keyOf(r));
    return Promise.all(
      groups.map((g) =>
        run(
          g.map((r) => this.keyOf(r)),
          g,
        ).then((value) => ({ resources: g, value })),
      ),
    );
  }

  /**
   * Sends `task` once the master was checked after its last reconnect (acquire only), also when
   * the round was decided meanwhile: every master that can take the key must get it (issue 16 —
   * a lock left on a bare majority is lost at the next single failure; a master in quarantine
   * gets it too, its vote just does not count). It is dropped only when `wanted()` says the
   * caller moved on (the attempt failed or its lock was released): its clean-up or release may
   * already be on the wire, and a SET sent after it would be an orphan key. Sent while still
   * wanted, it goes out on the connection before any such clean-up, which then removes it.
   * Rejects at once when the master cannot be reached (see {@link MasterNode.ready}).
   */
  private afterCheck(
    node: MasterNode,
    wanted: () => boolean,
    task: () => Promise<unknown>,
  ): Promise<unknown> {
    const pending = node.ready();
    if (!pending) return task();
    return pending.then(() => (wanted() ? task() : Promise.reject(new Error('not sent'))));
  }

  /**
   * The engine-side state of a lock; rejects anything that is not a `Lock` acquired by this
   * engine (a lock of another engine is neither released nor extended here: its keys may live on
   * other masters, under another prefix).
   */
  protected stateOf(lock: Lock): LockState {
    if (!(lock instanceof Lock))
      throw new InvalidArgumentError('lock', `must be a Lock, got ${describe(lock)}`);
    const state = lockState(lock);
    if (state.owner !== this) {
      throw new InvalidArgumentError(
        'lock',
        'was acquired by another Redlock engine; release or extend it with the engine that acquired it',
      );
    }
    return state;
  }

  private checkTtl(ttl: unknown, field = 'ttl'): number {
    return checkTtl(field, ttl, this.settings, argError);
  }

  private prepare(
    resources: unknown,
    options: AcquireOptions,
    names: readonly string[] = ACQUIRE_OPTION_NAMES,
  ): Request {
    const checked = checkAcquire(resources, options, this.settings, names);
    if (this.draining.signal.aborted) {
      throw new ShuttingDownError({
        resources: checked.resources,
        votes: [],
        attempts: 0,
        elapsed: 0,
      });
    }
    return { ...checked, keys: checked.resources.map((r) => this.keyOf(r)) };
  }

  /**
   * The signal a wait between attempts listens to: the caller's (if any) or the engine's drain,
   * whichever aborts first. Allocates only when the caller passed a signal.
   */
  private wakeSignal(signal: AbortSignal | undefined): { signal: AbortSignal; dispose(): void } {
    const drain = this.draining.signal;
    if (!signal) return { signal: drain, dispose: () => undefined };
    const both = new AbortController();
    const wake = (): void => both.abort();
    // Both signals may be shared by many waiters: one listener each, fanned out (wake.ts).
    const stopCaller = onAbort(signal, wake);
    const stopDrain = onAbort(drain, wake);
    return {
      signal: both.signal,
      dispose: () => {
        stopCaller();
        stopDrain();
      },
    };
  }
}

function round2(ms: number): number {
  return Math.round(ms * 100) / 100;
}

/** The youngest boot-marker age an acquire reply reported (ms), or undefined. */
function markerAge(reply: NodeReply | undefined): number | undefined {
  if (reply?.kind !== 'reply') return undefined;
  const ages = (reply.value as GroupReply[])
    .map((g) => (g.value as unknown[])[1])
    .filter((a): a is number => typeof a === 'number' && a >= 0);
  return ages.length > 0 ? Math.min(...ages) : undefined;
}

/** Fencing counters per resource from one master's acquire reply, or undefined. */
function countersOf(
  groups: readonly GroupReply[],
  resources: readonly string[],
): number[] | undefined {
  if (groups.length === 1 && groups[0].resources === resources) {
    const g = groups[0].value as unknown[];
    if (g[0] !== 1 || g.length !== resources.length + 2) return undefined;
    return g.slice(2).map(Number);
  }
  const byResource = new Map<string, number>();
  for (const { resources: group, value } of groups) {
    const g = value as unknown[];
    if (g[0] === 1) group.forEach((r, i) => byResource.set(r, Number(g[2 + i])));
  }
  const values = resources.map((r) => byResource.get(r));
  return values.every((v) => typeof v === 'number' && Number.isFinite(v))
    ? (values as number[])
    : undefined;
}

/** Random bytes are drawn from the CSPRNG in blocks; each token uses 20 fresh bytes, once. */
const TOKEN_BYTES = 20;
let pool = Buffer.alloc(0);
let poolOffset = 0;

/** A new lock token: 160 bits from `crypto.randomBytes`, base64url. */
function newToken(): string {
  if (poolOffset + TOKEN_BYTES > pool.length) {
    pool = randomBytes(TOKEN_BYTES * 256);
    poolOffset = 0;
  }
  const token = pool.toString('base64url', poolOffset, poolOffset + TOKEN_BYTES);
  poolOffset += TOKEN_BYTES;
  return token;
}

/** Acquire options checked against the engine settings, with defaults filled in. */
export interface CheckedAcquire {
  readonly resources: string[];
  readonly ttl: number;
  readonly retryCount: number;
  readonly retryDelay: number;
  readonly retryJitter: number;
  readonly waitTimeout: number | undefined;
  readonly signal: AbortSignal | undefined;
}

/**
 * Validates `acquire` arguments (typed errors naming the field, before any Redis call) and fills
 * in the defaults from `s`. Shared by every engine implementation.
 */
export function checkAcquire(
  resources: unknown,
  options: AcquireOptions,
  s: ResolvedSettings,
  names: readonly string[] = ACQUIRE_OPTION_NAMES,
): CheckedAcquire {
  const list = normalizeResources(resources);
  checkObject('options', options, argError);
  checkNames(options, names, argError, '', 'option');
  if (options.signal !== undefined && !(options.signal instanceof AbortSignal)) {
    throw new InvalidArgumentError('signal', 'must be an AbortSignal');
  }
  const opt = <K extends keyof AcquireOptions>(
    key: K,
    fallback: number | undefined,
    check: (v: unknown) => number,
  ): number | undefined => (options[key] === undefined ? fallback : check(options[key]));
  const retryDelay = opt('retryDelay', s.retryDelay, (v) =>
    checkDelay('retryDelay', v, argError),
  ) as number;
  const retryJitter = opt('retryJitter', s.retryJitter, (v) =>
    checkDelay('retryJitter', v, argError),
  ) as number;
  checkRetryWait(retryDelay, retryJitter, argError);
  return {
    resources: list,
    ttl: opt('ttl', s.ttl, (v) => checkTtl('ttl', v, s, argError)) as number,
    retryCount: opt('retryCount', s.retryCount, (v) =>
      checkInteger('retryCount', v, 0, 1_000_000, argError),
    ) as number,
    retryDelay,
    retryJitter,
    waitTimeout: opt('waitTimeout', undefined, (v) =>
      checkInteger('waitTimeout', v, 0, MAX_TIMER_MS, argError),
    ),
    signal: options.signal,
  };
}

/** Outcomes of masters that could not have granted a lock even if it were free. */
const UNUSABLE: ReadonlySet<NodeOutcome> = new Set<NodeOutcome>([
  'error',
  'timeout',
  'quarantined',
]);

const argError = (field: string, problem: string): Error =>
  new InvalidArgumentError(field, problem);

/** Validates resource names and returns them de-duplicated and sorted. */
export function normalizeResources(resources: unknown): string[] {
  const list = typeof resources === 'string' ? [resources] : resources;
  if (!Array.isArray(list)) {
    throw new InvalidArgumentError(
      'resources',
      `must be a string or an array of strings, got ${describe(resources)}`,
    );
  }
  if (list.length === 0) throw new InvalidArgumentError('resources', 'must not be empty');
  if (list.length > MAX_RESOURCES)
    throw new InvalidArgumentError(
      'resources',
      `at most ${MAX_RESOURCES} resources per lock, got ${list.length}`,
    );
  // An indexed loop, not forEach: holes of a sparse array (`[, 'a']`, `new Array(2)`) are checked.
  const names: string[] = [];
  for (let i = 0; i < list.length; i++) {
    const field = typeof resources === 'string' ? 'resources' : `resources[${i}]`;
    names.push(checkResourceName(field, (list as unknown[])[i], MAX_RESOURCE_LENGTH, argError));
  }
  return [...new Set(names)].sort();
}

function allGroups(value: unknown, test: (v: unknown) => boolean): boolean {
  return (value as GroupReply[]).every((g) => test(g.value));
}
