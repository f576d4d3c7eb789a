import { monotonicNow } from '../base/clock';
import { InvalidArgumentError, LockLostError } from '../base/errors';
import type { NodeVote } from '../base/errors';
import type { LockKindName, LockKindSpec } from '../base/kind-spec';
import type { Grant } from '../store';
import { validUntil } from '../quorum/protocol';
import type { ReleaseResult } from '../quorum/protocol';
import { SERIALIZED_LOCK_VERSION } from './portable';
import type { SerializedLock } from './portable';
import type { ReleaseOptions } from '../base/types';
import { describe as describeValue } from '../base/validate';
import '../base/disposable'; // the typings of `Symbol.asyncDispose` (Lock's `await using`)

export type { ReleaseResult } from '../quorum/protocol';

/**
 * A lock and all of its state: identity ({@link Lock}), validity and the state machine
 * granted → extended* → released | lost ({@link grantState}, {@link applyExtension},
 * {@link expire}, {@link markReleased}), the expiry timer behind its signal, and the signal
 * that re-checks the validity when read. The set of locks an engine holds: held.ts.
 */

/** The routine run by {@link Redlock.using}. */
export type LockedRoutine<T> = (signal: AbortSignal, lock: Lock) => Promise<T> | T;

/** The engine operations a {@link Lock} delegates to. */
export interface LockOwner {
  release(lock: Lock, options?: ReleaseOptions): Promise<ReleaseResult>;
  extend(lock: Lock, ttl?: number): Promise<Lock>;
  /** The owner's settings (the key prefix goes into {@link Lock.toJSON}). */
  readonly settings?: { readonly keyPrefix: string };
}

/** Mutable part of a lock, changed only by the engine. */
export interface LockState {
  /** Monotonic-clock time (ms) at which the lock stops being valid. */
  validUntil: number;
  /** Wall-clock ms at which the lock stops being valid, for humans. */
  expiresAt: number;
  /** Wall-clock ms at which the keys expire if nobody extends (ttl from the last request sent). */
  keysExpireAt?: number;
  ttl: number;
  extensions: number;
  released: boolean;
  /** Why the lock was found lost, once it was. */
  lostReason?: LockLostError;
  votes: readonly NodeVote[];
  /** Monotonic-clock time (ms) at which the lock was granted. */
  acquiredAt: number;
  controller?: AbortController;
  /** Observers want to hear of a loss when it happens: the expiry timer runs without a signal. */
  watched?: boolean;
  timer?: NodeJS.Timeout;
  /** Told once when the lock is found lost (not on release): the engine's observers. */
  onLost?: LockLossListener;
  /** The engine that created the lock (set by the {@link Lock} constructor): the only one that may release or extend it. */
  owner?: LockOwner;
  /** What the store granted (told when the lock ends: see {@link Grant.ended}). */
  grant?: Grant;
  /**
   * `lockAtLeastFor` (ms after {@link acquiredAt}) honoured by every release of the lock: until
   * then a release shortens the keys' TTL to the remainder instead of deleting them.
   */
  lockAtLeastFor?: number;
  /**
   * Told once when the lock ends — released by its holder (before the release is sent) or found
   * lost: the engine's local queue, which wakes the next waiter (waiting/fifo-queue.ts,
   * fair/fair-queue.ts).
   */
  onEnd?: LockEndListener;
}

/*
 * What a lock tells when it ends or is lost goes to objects shared by every lock of the engine
 * (its observers, its local queue), each told which lock — never a closure made per lock. A
 * closure kept in the lock's state made V8 allocate the states, their grants and what those hold
 * straight in the old generation (allocation-site pretenuring: the closures were allocated there
 * by optimized code, and the young states they held all survived the next scavenge). Those
 * objects, garbage a few hundred µs later, then stayed until the next full collection and kept
 * the young objects they pointed to alive through every scavenge: about 1 KB per lock promoted,
 * a quarter more CPU per acquire + release (bench/engine-cost.ts, run under ts-node as the bench
 * is; test/unit/core/lock-state-young.spec.ts).
 */

/** Told when a lock is found lost (see {@link LockState.onLost}). */
export interface LockLossListener {
  lost(lock: Lock, state: LockState, reason: LockLostError): void;
}

/** Told when a lock ends, released or lost (see {@link LockState.onEnd}). */
export interface LockEndListener {
  ended(lock: Lock): void;
}

/** The state of a lock for `grant`: valid from the time its request was sent (protocol step 2). */
export function grantState(grant: Grant, driftFactor: number): LockState {
  return {
    validUntil: validUntil(grant.start, grant.ttl, driftFactor),
    expiresAt: validUntil(grant.wallStart, grant.ttl, driftFactor),
    keysExpireAt: grant.wallStart + grant.ttl,
    ttl: grant.ttl,
    extensions: 0,
    released: false,
    votes: grant.votes,
    acquiredAt: grant.start,
    grant,
  };
}

/** Records a successful extension (validity from `x.start`, when it was sent); re-arms the expiry timer. */
export function applyExtension(
  lock: Lock,
  s: LockState,
  x: { ttl: number; start: number; wallStart: number; votes: readonly NodeVote[] },
  driftFactor: number,
): void {
  s.validUntil = validUntil(x.start, x.ttl, driftFactor);
  s.expiresAt = validUntil(x.wallStart, x.ttl, driftFactor);
  s.keysExpireAt = x.wallStart + x.ttl;
  s.ttl = x.ttl;
  s.extensions++;
  s.votes = x.votes;
  scheduleExpiry(lock, s);
}

/** Marks a lock released (its holder's choice: the signal does not abort). */
export function markReleased(lock: Lock, s: LockState): void {
  const first = !s.released && !s.lostReason;
  s.released = true;
  if (s.grant) s.grant.ended = true;
  disarm(s);
  if (first) s.onEnd?.ended(lock);
}

/**
 * A fencing-token table keyed by resource name: a frozen object without prototype, so that
 * any resource name — `'__proto__'`, `'constructor'`, `'hasOwnProperty'` — is an own key
 * holding its own token, and names that were not locked read `undefined`.
 */
export function fencingTable(
  entries: Iterable<readonly [string, number]>,
): Readonly<Record<string, number>> {
  const table = Object.create(null) as Record<string, number>;
  // No prototype, so '__proto__' and 'constructor' are plain own properties here.
  for (const [resource, token] of entries) table[resource] = token;
  return Object.freeze(table);
}

/** The lock an engine made from `grant`, if any (stores know grants; fault controls need locks). */
export function lockOfGrant(grant: Grant): Lock | undefined {
  return grant.lock instanceof Lock ? grant.lock : undefined;
}

/** The state of `lock` when it is a lock an engine made; `undefined` for anything else. */
let stateOf: (lock: unknown) => LockState | undefined;

/** Set while an engine creates a lock: the only way a `Lock` can be constructed. */
let minting = false;

/**
 * Engine-internal access to a lock's mutable state. Anything that is not a lock an engine
 * granted (an object made with `Object.create(Lock.prototype)`, a copy) is an
 * {@link InvalidArgumentError}.
 */
export function lockState(lock: Lock): LockState {
  const state = stateOf(lock);
  if (!state) {
    throw new InvalidArgumentError('lock', 'is not a lock granted by a Redlock engine');
  }
  return state;
}

/** Creates a granted lock (engines only: `new Lock()` is refused everywhere else). */
export function mintLock(owner: LockOwner, init: ConstructorParameters<typeof Lock>[1]): Lock {
  minting = true;
  try {
    return new Lock(owner, init);
  } finally {
    minting = false;
  }
}

/**
 * A lock held on a majority of masters. Mutual exclusion is guaranteed only while
 * {@link remainingValidity} is positive; {@link signal} aborts when it ends.
 */
export class Lock {
  /** Locked resources, de-duplicated and sorted. */
  readonly resources: readonly string[];
  /** The random token (≥ 128 bits) that proves ownership on each master. */
  readonly value: string;
  /** Attempts made by the acquire that produced this lock. */
  readonly attempts: number;
  /**
   * The kind of lock: `mutex` (a plain, exclusive lock), `shared` (a shared read lock,
   * `shared: true`) or `semaphore` (`limit: n`).
   */
  readonly kind: LockKindName;
  /** A semaphore's limit; `undefined` for the other kinds. */
  readonly limit: number | undefined;

  /**
   * Locks are created by the engine only (`acquire`, `tryAcquire`, `using`): constructing one
   * yourself throws {@link InvalidArgumentError} — a forged lock must never reach `release` or
   * `extend`.
   * @param owner engine that created the lock; @param init its identity and initial state.
   */
  constructor(
    private readonly owner: LockOwner,
    init: {
      resources: readonly string[];
      value: string;
      attempts: number;
      /** Fencing token per resource, in the order of `resources`; empty when fencing is off. */
      fencingTokens: readonly number[];
      state: LockState;
      /** The kind of lock; a plain lock when absent. */
      kind?: LockKindSpec;
    },
  ) {
    if (!minting) {
      throw new InvalidArgumentError(
        'lock',
        'locks are created by the engine (acquire, tryAcquire, using), not constructed',
      );
    }
    this.resources = init.resources;
    this.value = init.value;
    this.attempts = init.attempts;
    this.kind = init.kind?.name ?? 'mutex';
    this.limit = this.kind === 'semaphore' ? init.kind?.limit : undefined;
    this.tokens = init.fencingTokens;
    init.state.owner = owner;
    this.#state = init.state;
    if (init.state.grant) init.state.grant.lock = this;
  }

  /**
   * The lock's mutable state, engine-internal (base of {@link lockState}). A private field, not a
   * table keyed by lock: nothing to look up or to collect per lock.
   */
  readonly #state: LockState;

  static {
    stateOf = (lock) =>
      typeof lock === 'object' && lock !== null && #state in lock ? lock.#state : undefined;
  }

  /** Fencing tokens in the order of {@link resources} (empty when fencing is off). */
  private readonly tokens: readonly number[];
  /** The name-keyed table, made on first read. */
  private table: Readonly<Record<string, number>> | undefined;

  /**
   * Fencing token per resource: strictly increasing across successive holders of the resource.
   * Empty when fencing is disabled. A frozen table without prototype (any resource name, even
   * `'__proto__'`, is an own key), made when first read: a lock nobody asks pays nothing for it.
   */
  get fencingTokens(): Readonly<Record<string, number>> {
    return (this.table ??= fencingTable(
      this.tokens.map((t, j) => [this.resources[j], t] as const),
    ));
  }

  /** The fencing token of the first resource (the only one for single-resource locks). */
  get fencingToken(): number | undefined {
    return this.tokens[0];
  }

  /** Milliseconds of validity left, from a monotonic clock; 0 once expired or released. */
  get remainingValidity(): number {
    const s = lockState(this);
    return s.released ? 0 : Math.max(0, s.validUntil - monotonicNow());
  }

  /** Whether the lock can still be relied on (not released, validity left). */
  get isValid(): boolean {
    return this.remainingValidity > 0;
  }

  /** Wall-clock time (ms since epoch) at which the validity ends. For display only. */
  get expiresAt(): number {
    return lockState(this).expiresAt;
  }

  /** TTL in ms requested by the last acquire or extend. */
  get ttl(): number {
    return lockState(this).ttl;
  }

  /** Number of successful extensions so far. */
  get extensions(): number {
    return lockState(this).extensions;
  }

  /** Per-master votes of the winning attempt (or of the last extension). */
  get votes(): readonly NodeVote[] {
    return lockState(this).votes;
  }

  /** Whether {@link release} was called. */
  get released(): boolean {
    return lockState(this).released;
  }

  /**
   * Aborts (with a {@link LockLostError} as reason) when the validity window ends — at the local
   * deadline, even if the event loop was busy when it passed: the signal's `aborted`, `reason`
   * and `throwIfAborted()` re-check the monotonic clock whenever they are read, so a signal kept
   * since before a long synchronous block (or a process pause) reads aborted right after it, as
   * do `remainingValidity` and `isValid` — or when the engine learns the lock was lost, or when
   * the engine is
   * closed (shutdown) while the lock is held: then it aborts before the keys are deleted. Not
   * aborted by the holder's own `release()`.
   */
  get signal(): AbortSignal {
    const s = lockState(this);
    if (!s.controller) {
      s.controller = new AbortController();
      // Found lost before anyone listened: the new signal starts aborted.
      if (s.lostReason) s.controller.abort(s.lostReason);
      else {
        truthful(s.controller.signal, this, s);
        scheduleExpiry(this, s);
      }
    } else if (!s.controller.signal.aborted && !s.released && s.validUntil <= monotonicNow()) {
      expire(this, s, 'validity ended');
    }
    return s.controller.signal;
  }

  /**
   * Releases the lock on every master. Same as `redlock.release(lock, options)` (see there for
   * `lockAtLeastFor` and `wait`).
   */
  release(options?: ReleaseOptions): Promise<ReleaseResult> {
    return this.owner.release(this, options);
  }

  /** Extends the lock to `ttl` ms (default: its current ttl). Same as `redlock.extend(lock, ttl)`. */
  extend(ttl?: number): Promise<Lock> {
    return this.owner.extend(this, ttl);
  }

  /**
   * Releases the lock when an `await using` block ends, however it ends (TypeScript ≥ 5.2):
   * `await using lock = await redlock.acquire('x')`. A lock already released disposes quietly
   * (nothing is sent again); one that expired or was lost is released like {@link release} does
   * it — no throw, the `released` event reports what each master did.
   */
  async [Symbol.asyncDispose](): Promise<void> {
    if (!lockState(this).released) await this.owner.release(this);
  }

  /**
   * The lock as plain data (also what `JSON.stringify(lock)` writes): resources, token, kind,
   * ttl, wall-clock grant and key expiry, fencing tokens, `lockAtLeastFor`. Another process with
   * an engine over the same masters and key prefix turns it back into a lock with
   * `restore(data)`, then extends or releases it. Whoever has it can do so: keep it as private as
   * the lock itself.
   */
  toJSON(): SerializedLock {
    const s = lockState(this);
    const grant = s.grant as Grant; // every lock is created from a grant
    return {
      version: SERIALIZED_LOCK_VERSION,
      kind: this.kind,
      ...(this.limit === undefined ? {} : { limit: this.limit }),
      keyPrefix: this.owner.settings?.keyPrefix ?? '',
      resources: [...this.resources],
      token: this.value,
      ttl: s.ttl,
      acquiredAt: grant.wallStart,
      expiresAt: s.keysExpireAt ?? s.expiresAt,
      fencingTokens: Object.fromEntries(Object.entries(this.fencingTokens)),
      ...(s.lockAtLeastFor === undefined ? {} : { lockAtLeastFor: s.lockAtLeastFor }),
    };
  }
}

/**
 * The state of `lock` for the engine `owner`: anything that is not a `Lock` granted (or restored)
 * by `owner` is an {@link InvalidArgumentError} — a lock of another engine is neither released
 * nor extended there (its keys may live on other masters, under another prefix; `restore` is
 * the explicit way to take a lock over).
 */
export function ownedState(lock: Lock, owner: LockOwner): LockState {
  if (!(lock instanceof Lock)) {
    throw new InvalidArgumentError('lock', `must be a Lock, got ${describeValue(lock)}`);
  }
  const state = lockState(lock);
  if (state.owner !== owner) {
    throw new InvalidArgumentError(
      'lock',
      'was acquired by another Redlock engine; release or extend it with the engine that acquired it, or take it over with restore(lock.toJSON())',
    );
  }
  return state;
}

const ABORTED = Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'aborted')?.get;
const REASON = Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'reason')?.get;
const THROW_IF_ABORTED = AbortSignal.prototype.throwIfAborted;

/**
 * Makes `signal` tell the truth when it is read: a holder whose event loop was blocked (a long
 * synchronous step, a GC pause, SIGSTOP) past the validity deadline runs on before the expiry
 * timer can fire, and would otherwise read `aborted === false` on a signal it kept. Its
 * `aborted`, `reason` and `throwIfAborted()` first compare the deadline with the monotonic clock
 * and expire the lock when it has passed (the abort event fires then, as at the timer). Listeners
 * and `AbortSignal.any` still hear of the end at the timer or at the first such read.
 */
function truthful(signal: AbortSignal, lock: Lock, s: LockState): void {
  if (!ABORTED || !REASON) return; // (every supported Node has both)
  const check = (): void => {
    if (!s.lostReason && !s.released && s.validUntil <= monotonicNow()) {
      expire(lock, s, 'validity ended');
    }
  };
  Object.defineProperties(signal, {
    aborted: {
      configurable: true,
      get(this: AbortSignal): boolean {
        check();
        return ABORTED.call(this) as boolean;
      },
    },
    reason: {
      configurable: true,
      get(this: AbortSignal): unknown {
        check();
        return REASON.call(this);
      },
    },
    throwIfAborted: {
      configurable: true,
      value(this: AbortSignal): void {
        check();
        THROW_IF_ABORTED.call(this);
      },
    },
  });
}

/** (Re)arms the expiry timer of a lock whose signal is in use or that observers watch. */
export function scheduleExpiry(lock: Lock, s: LockState): void {
  if (s.timer) clearTimeout(s.timer);
  s.timer = undefined;
  if (!(s.controller || s.watched) || s.lostReason || s.released) return;
  const left = s.validUntil - monotonicNow();
  if (left <= 0) {
    expire(lock, s, 'validity ended');
    return;
  }
  s.timer = setTimeout(() => scheduleExpiry(lock, s), left + 1);
  s.timer.unref?.();
}

/** Marks a lock as lost now and aborts its signal. */
export function expire(lock: Lock, s: LockState, why: string, cause?: unknown): void {
  if (s.timer) clearTimeout(s.timer);
  s.timer = undefined;
  s.validUntil = Math.min(s.validUntil, monotonicNow());
  if (s.lostReason || s.released) return;
  if (s.grant) s.grant.ended = true;
  const err = new LockLostError(
    {
      resources: lock.resources,
      votes: s.votes,
      attempts: lock.attempts,
      elapsed: monotonicNow() - s.acquiredAt,
    },
    why,
    cause,
  );
  s.lostReason = err;
  s.controller?.abort(err);
  s.onLost?.lost(lock, s, err);
  s.onEnd?.ended(lock);
}

/** Stops the expiry timer (after release). */
export function disarm(s: LockState): void {
  if (s.timer) clearTimeout(s.timer);
  s.timer = undefined;
}
