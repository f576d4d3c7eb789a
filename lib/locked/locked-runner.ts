import { Inject, Injectable, Logger } from '@nestjs/common';
import {
  InvalidArgumentError,
  KindMismatchError,
  LockContendedError,
  LockLostError,
  ShuttingDownError,
} from '../core';
import type { LockKindSpec } from '../core/base/kind-spec';
import type { AcquireOptions, Lock, LockedRoutine, UsingOptions } from '../core';
import { checkKind, describe, errorMessage, normalizeResources } from '../core/base/validate';
import type {
  LockContext,
  LockedCallContext,
  LockedMetadata,
  LockedOptions,
  ResolvedRedlockModuleOptions,
} from '../interfaces';
import type { RedlockBackend } from '../redlock.backend';
import {
  LOCKED_METADATA,
  REDLOCK_BACKEND,
  REDLOCK_LOGGER_CONTEXT,
  REDLOCK_MODULE_OPTIONS,
} from '../redlock.constants';
import { releaseFailedMessage, shutdownTimeoutMessage } from '../redlock.messages';
import { LockContextView, findContext, framesOf, lockStorage } from './lock-context';
import type { LockFrame } from './lock-context';
import type { AnyMethod, LockedMethodRunner } from './locked-method';
import { resolveResources } from './resolve-resources';
import { argumentFields } from './call-arguments';

/** One `@Locked()` call in progress: what the interceptor and the method wrappers get. */
export interface LockedEntry {
  /** The lock this entry acquired; `undefined` when the chain already held every resource. */
  readonly context: LockContext | undefined;
  /** Runs `fn` inside the entry's lock context (so that `current()` and reentrancy see it). */
  run<T>(fn: () => T): T;
  /** Stops auto-extension and releases what this entry acquired. Idempotent; never rejects. */
  exit(): Promise<void>;
}

/** Extra inputs of {@link LockedRunner.enterLocked}. */
export interface EnterLockedOptions {
  /** The metadata of the handler the interceptor locks for (its wrapper then does not lock again). */
  readonly pending?: LockedMetadata;
  /** Cancels a pending acquisition (e.g. the client went away). */
  readonly signal?: AbortSignal;
}

/**
 * The `@Locked()` runtime: enters locked calls (reentrancy through the call chain's lock
 * context, `onLocked`, auto-extension), runs `@Locked()` provider methods and `using()`
 * routines in the lock context, and keeps the set of running locked calls that shutdown waits
 * for. Used by `LockedInterceptor`, the method wrappers and `RedlockService`.
 */
@Injectable()
export class LockedRunner implements LockedMethodRunner {
  private readonly logger = new Logger(REDLOCK_LOGGER_CONTEXT);
  private readonly running = new Set<Promise<void>>();

  constructor(
    /** The resolved module options. */
    @Inject(REDLOCK_MODULE_OPTIONS) readonly options: ResolvedRedlockModuleOptions,
    @Inject(REDLOCK_BACKEND) private readonly backend: RedlockBackend,
  ) {}

  /** Number of locked calls and `using()` routines running now. */
  get runningCount(): number {
    return this.running.size;
  }

  /**
   * Waits (at most `timeout` ms) for the running locked calls to finish; logs when some did not.
   */
  async settle(timeout: number): Promise<void> {
    if (this.running.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const settled = await Promise.race([
      Promise.allSettled([...this.running]).then(() => true),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeout))),
    ]);
    clearTimeout(timer);
    if (!settled) this.logger.warn(shutdownTimeoutMessage(this.running.size, timeout));
  }

  /** `using()` of the engine, with the routine inside the lock context and tracked for shutdown. */
  async using<T>(
    resources: string | string[],
    routine: LockedRoutine<T>,
    options?: UsingOptions,
  ): Promise<T> {
    if (typeof routine !== 'function') {
      throw new InvalidArgumentError('routine', `must be a function, got ${describe(routine)}`);
    }
    const parent = lockStorage.getStore();
    return this.track(() =>
      this.backend.engine.using(
        resources,
        (signal, lock) =>
          lockStorage.run(
            { owner: this, parent, context: new LockContextView(lock), pending: undefined },
            () => routine(signal, lock),
          ),
        options,
      ),
    );
  }

  /** The innermost lock of the current call chain (covering `resources`, when given). */
  current(resources?: string | string[]): LockContext | undefined {
    const wanted = resources === undefined ? undefined : normalizeResources(resources);
    return findContext(this, wanted);
  }

  /**
   * Enters a `@Locked()` call: re-enters the locks the chain already holds, acquires the missing
   * resources according to `options.onLocked`, starts auto-extension. Resolves to `undefined`
   * when the call must be skipped.
   */
  async enterLocked(
    resources: readonly string[],
    options: LockedOptions,
    extra: EnterLockedOptions = {},
  ): Promise<LockedEntry | undefined> {
    const engine = this.backend.engine;
    // (Once per call, and the user's options: a spread copies an own `__proto__` as a field.)
    // eslint-disable-next-line no-restricted-syntax
    const o = { ...this.options.lockedDefaults, ...definedOnly(options) };
    const wanted = normalizeResources([...resources]);
    const kind = checkKind(o.shared, o.limit, 'options.');
    const parent = lockStorage.getStore();
    const held = new Set<string>();
    for (const frame of framesOf(this, parent)) {
      const ctx = frame.context;
      if (!ctx || !ctx.resources.some((r) => wanted.includes(r))) continue;
      reentrantKind(ctx.lock, kind, wanted);
      if (ctx.signal.aborted) {
        throw ctx.signal.reason instanceof Error
          ? ctx.signal.reason
          : new LockLostError(
              { resources: ctx.resources, votes: [], attempts: 0, elapsed: 0 },
              'it was lost before a reentrant call',
            );
      }
      for (const r of ctx.resources) held.add(r);
    }
    const missing = wanted.filter((r) => !held.has(r));
    let lock: Lock | undefined;
    let stop = (): void => undefined;
    if (missing.length > 0) {
      try {
        lock = await engine.acquire(missing, acquireOptions(o, extra.signal));
      } catch (err) {
        // 'skip' means "not running it is fine": also when the app no longer takes new locks.
        if (
          o.onLocked === 'skip' &&
          (err instanceof LockContendedError || err instanceof ShuttingDownError)
        ) {
          return undefined;
        }
        throw err;
      }
      if (o.autoExtend) stop = engine.keepAlive(lock);
    }
    const frame: LockFrame = {
      owner: this,
      parent,
      context: lock ? new LockContextView(lock) : undefined,
      pending: extra.pending,
    };
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    this.running.add(finished);
    let exited: Promise<void> | undefined;
    return {
      context: frame.context,
      run: (fn) => lockStorage.run(frame, fn),
      exit: () =>
        (exited ??= (async () => {
          stop();
          if (lock) await this.releaseQuietly(lock);
          this.running.delete(finished);
          finish();
        })()),
    };
  }

  /** Runs a `@Locked()` provider method (called by its wrapper). */
  async runLockedMethod(
    instance: object,
    original: AnyMethod,
    wrapper: AnyMethod,
    args: unknown[],
  ): Promise<unknown> {
    const metadata = Reflect.getMetadata(LOCKED_METADATA, wrapper) as LockedMetadata;
    const target = instance.constructor;
    // A direct call (no interceptor): `params` / `query` / `body` / `data` from the arguments
    // that Nest's parameter decorators map (lib/locked/call-arguments.ts).
    const call: LockedCallContext = Object.assign(
      { args, target, method: wrapper.name },
      argumentFields(target, wrapper.name, wrapper, args),
    );
    const entry = await this.enterLocked(
      resolveResources(metadata.resources, call),
      metadata.options,
    );
    if (!entry) return undefined;
    try {
      return await entry.run(() => original.apply(instance, args));
    } finally {
      await entry.exit();
    }
  }

  private async track<T>(fn: () => Promise<T>): Promise<T> {
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    this.running.add(finished);
    try {
      return await fn();
    } finally {
      this.running.delete(finished);
      finish();
    }
  }

  private async releaseQuietly(lock: Lock): Promise<void> {
    try {
      const result = await this.backend.engine.release(lock);
      if (!result.complete) {
        this.logger.debug(
          `Release of ${lock.resources.join(', ')} incomplete: ${result.deleted} master(s) deleted it`,
        );
      }
    } catch (err) {
      this.logger.warn(
        releaseFailedMessage(lock.resources, this.backend.redact(errorMessage(err))),
      );
    }
  }
}

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * Reentrancy across kinds: a call chain re-enters a lock it holds when the nested call asks for
 * the same kind (same limit), or for a shared lock inside a plain one (a writer may read). Anything
 * else — a plain lock inside a shared one (an upgrade), a semaphore inside another kind — would
 * wait for itself: a {@link KindMismatchError} at once.
 */
function reentrantKind(held: Lock, asked: LockKindSpec, resources: readonly string[]): void {
  const same = held.kind === asked.name && held.limit === asked.limit;
  if (same || (held.kind === 'mutex' && asked.name === 'shared')) return;
  throw new KindMismatchError({
    resources,
    votes: [],
    attempts: 0,
    elapsed: 0,
    requested: asked,
    found:
      held.kind === 'semaphore'
        ? { kind: 'semaphore', limit: held.limit ?? 1 }
        : { kind: held.kind },
  });
}

function acquireOptions(
  o: LockedOptions & { onLocked: string },
  signal: AbortSignal | undefined,
): AcquireOptions {
  const keep = o.lockAtLeastFor === undefined ? {} : { lockAtLeastFor: o.lockAtLeastFor };
  const kind = { shared: o.shared, limit: o.limit, ...keep };
  if (o.onLocked !== 'wait') return { ttl: o.ttl, retryCount: 0, signal, ...kind };
  // (`kind` last: its fields are not among the others; see lib/core/base/fields.ts.)
  return {
    ttl: o.ttl,
    // With a deadline and no explicit count, the deadline alone bounds the wait.
    retryCount: o.retryCount ?? (o.waitTimeout !== undefined ? 1_000_000 : undefined),
    retryDelay: o.retryDelay,
    retryJitter: o.retryJitter,
    waitTimeout: o.waitTimeout,
    signal,
    ...kind,
  };
}
