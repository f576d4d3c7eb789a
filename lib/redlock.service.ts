import { loadTransportExceptions } from './errors/transport.error';
import { Inject, Injectable, Logger } from '@nestjs/common';
import type {
  BeforeApplicationShutdown,
  OnApplicationShutdown,
  OnModuleInit,
} from '@nestjs/common';
import {
  InvalidArgumentError,
  LockContendedError,
  LockLostError,
  Redlock,
  ShuttingDownError,
  normalizeResources,
} from './core';
import type {
  AcquireOptions,
  Lock,
  LockedRoutine,
  RedlockClient,
  ReleaseResult,
  UsingOptions,
} from './core';
import { errorMessage } from './core/masters/node';
import { describe } from './core/validate';
import { createClients, redactText } from './clients';
import type { RedlockClients } from './clients';
import { resolveResources } from './decorators/resolve-resources';
import type { AnyMethod, LockedMethodRunner } from './decorators/locked-method';
import type {
  LockContext,
  LockedCallContext,
  LockedMetadata,
  LockedOptions,
  ResolvedRedlockModuleOptions,
} from './interfaces';
import { engineSettingsOf } from './options';
import { logLockEvents } from './redlock.logging';
import { instrumentRedlock, loadOpenTelemetry } from './telemetry/opentelemetry';
import { LockContextView, findContext, framesOf, lockStorage } from './redlock-context';
import type { LockFrame } from './redlock-context';
import {
  LOCKED_METADATA,
  REDLOCK_LOGGER_CONTEXT,
  REDLOCK_MODULE_OPTIONS,
} from './redlock.constants';
import {
  releaseFailedMessage,
  shutdownTimeoutMessage,
  startupUnreachableMessage,
} from './redlock.messages';

/**
 * One `@Locked()` call that is in progress: what the interceptor and the method wrappers get
 * from {@link RedlockService.enterLocked}.
 */
export interface LockedEntry {
  /** The lock this entry acquired; `undefined` when the chain already held every resource. */
  readonly context: LockContext | undefined;
  /** Runs `fn` inside the entry's lock context (so that `current()` and reentrancy see it). */
  run<T>(fn: () => T): T;
  /** Stops auto-extension and releases what this entry acquired. Idempotent; never rejects. */
  exit(): Promise<void>;
}

/** Extra inputs of {@link RedlockService.enterLocked}. */
export interface EnterLockedOptions {
  /** The metadata of the handler the interceptor locks for (its wrapper then does not lock again). */
  readonly pending?: LockedMetadata;
  /** Cancels a pending acquisition (e.g. the client went away). */
  readonly signal?: AbortSignal;
}

/**
 * Distributed locks for Nest applications: the Redlock engine on the configured masters, plus
 * the call-chain lock context used by `@Locked()`.
 */
@Injectable()
export class RedlockService
  implements OnModuleInit, BeforeApplicationShutdown, OnApplicationShutdown, LockedMethodRunner
{
  /** The underlying engine. */
  readonly engine: Redlock;
  private readonly connections: RedlockClients;
  private readonly logger = new Logger(REDLOCK_LOGGER_CONTEXT);
  private readonly running = new Set<Promise<void>>();
  /** Stops the event observers (logging, telemetry) once the engine is closed. */
  private readonly unobserve: (() => void)[] = [];
  private draining: Promise<void> | undefined;
  private shutdown: Promise<void> | undefined;

  constructor(
    /** The resolved module options. */
    @Inject(REDLOCK_MODULE_OPTIONS) readonly options: ResolvedRedlockModuleOptions,
  ) {
    this.connections = createClients(options.clients, options.clientOptions, {
      warn: (m) => this.logger.warn(m),
      log: (m) => this.logger.log(m),
    });
    try {
      this.engine = new Redlock(this.connections.clients, {
        ...engineSettingsOf(options),
        logger: {
          warn: (m) => this.logger.warn(redactText(m, this.connections.secrets)),
          debug: (m) => this.logger.debug(redactText(m, this.connections.secrets)),
        },
      });
      this.unobserve.push(logLockEvents(this.engine, this.logger));
      const telemetry = options.telemetry;
      if (telemetry !== false && (telemetry !== 'auto' || loadOpenTelemetry() !== undefined)) {
        this.unobserve.push(instrumentRedlock(this.engine, telemetry === 'auto' ? {} : telemetry));
      }
    } catch (err) {
      for (const stop of this.unobserve) stop();
      void this.connections.close();
      throw err;
    }
  }

  /** The ioredis clients, one per master, in the order of the `clients` option. */
  get clients(): readonly RedlockClient[] {
    return this.connections.clients;
  }

  /** Display names of the masters, passwords redacted, in order. */
  get masterNames(): readonly string[] {
    return this.connections.names;
  }

  /**
   * Acquires a lock on all `resources`, retrying on contention (see the engine's `acquire`).
   * Throws `LockContendedError`, `NoQuorumError`, `WaitTimeoutError`, `LockAbortedError`, or
   * `ShuttingDownError` once the application shuts down.
   */
  acquire(resources: string | string[], options?: AcquireOptions): Promise<Lock> {
    return this.engine.acquire(resources, options);
  }

  /**
   * One attempt: the lock, or `null` when it is held elsewhere. Throws `NoQuorumError` when too
   * few masters answered, `ShuttingDownError` once the application shuts down.
   */
  tryAcquire(
    resources: string | string[],
    options?: Omit<AcquireOptions, 'retryCount' | 'waitTimeout'>,
  ): Promise<Lock | null> {
    return this.engine.tryAcquire(resources, options);
  }

  /** Releases a lock on every master. */
  release(lock: Lock): Promise<ReleaseResult> {
    return this.engine.release(lock);
  }

  /** Extends a lock to `ttl` ms from now (default: its current ttl). */
  extend(lock: Lock, ttl?: number): Promise<Lock> {
    return this.engine.extend(lock, ttl);
  }

  /**
   * Acquires, runs `routine(signal, lock)` with automatic extension, and always releases.
   * The routine runs inside the lock context: `current()` returns this lock there. Not
   * reentrant: a routine that asks for a resource its own chain holds will contend with itself
   * (use `@Locked()` methods for reentrancy).
   */
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
      this.engine.using(
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

  /**
   * The lock held by the current call chain (a `@Locked()` method or a `using()` routine, and
   * everything they call), or `undefined` outside of one. With `resources`, the innermost lock
   * that covers all of them.
   */
  current(resources?: string | string[]): LockContext | undefined {
    const wanted = resources === undefined ? undefined : normalizeResources(resources);
    return findContext(this, wanted);
  }

  /**
   * Enters a `@Locked()` call: re-enters the locks the chain already holds, acquires the missing
   * resources according to `options.onLocked`, starts auto-extension. Resolves to `undefined`
   * when the call must be skipped. Used by `LockedInterceptor` and the method wrappers; not
   * meant to be called directly.
   */
  async enterLocked(
    resources: readonly string[],
    options: LockedOptions,
    extra: EnterLockedOptions = {},
  ): Promise<LockedEntry | undefined> {
    const o = { ...this.options.lockedDefaults, ...definedOnly(options) };
    const wanted = normalizeResources([...resources]);
    const parent = lockStorage.getStore();
    const held = new Set<string>();
    for (const frame of framesOf(this, parent)) {
      const ctx = frame.context;
      if (!ctx || !ctx.resources.some((r) => wanted.includes(r))) continue;
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
        lock = await this.engine.acquire(missing, acquireOptions(o, extra.signal));
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
      if (o.autoExtend) stop = this.engine.keepAlive(lock);
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
    const call: LockedCallContext = {
      args,
      target: instance.constructor,
      method: wrapper.name,
    };
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

  /**
   * Startup: waits until every master answered its first connection attempt (at most the
   * clients' `connectTimeout`), so that locks taken right after bootstrap (e.g. by scheduled
   * jobs) do not fail merely because the connections were still opening. Masters that are down
   * do not fail the bootstrap: they are reported, and locks work as soon as a quorum is reachable.
   */
  async onModuleInit(): Promise<void> {
    await loadTransportExceptions();
    const timeout = Math.min(
      10_000,
      Math.max(100, this.options.clientOptions.connectTimeout ?? 2000),
    );
    const ready = await waitForConnections(this.connections.clients, timeout);
    const down = this.connections.names.filter((_, i) => !ready[i]);
    if (down.length > 0) {
      this.logger.warn(
        startupUnreachableMessage(down, this.connections.clients.length, this.engine.quorum),
      );
    }
  }

  /**
   * `true` once the application started shutting down: no new locks are taken (they fail with
   * `ShuttingDownError`, which `@Locked()` handlers map to 503), running locked calls finish.
   */
  get isShuttingDown(): boolean {
    return this.engine.isDraining;
  }

  /**
   * Shutdown, first step (before Nest closes the HTTP server): stops taking new locks — new
   * acquisitions throw `ShuttingDownError`, waiting ones end with it at once — and waits (at most
   * `shutdownTimeout` ms) for the running locked calls (`@Locked()` handlers and methods, `using()`
   * routines) to finish. Their locks stay valid and auto-extended meanwhile.
   */
  beforeApplicationShutdown(): Promise<void> {
    return (this.draining ??= this.drain());
  }

  /**
   * Shutdown, last step: after the drain (run here if `beforeApplicationShutdown` was not called),
   * closes the engine — which releases every lock this process still holds — and only then closes
   * the clients the module created. Clients passed in as instances stay open.
   */
  onApplicationShutdown(): Promise<void> {
    return (this.shutdown ??= this.close());
  }

  private async drain(): Promise<void> {
    this.engine.drain();
    if (this.running.size === 0) return;
    const timeout = this.options.shutdownTimeout;
    let timer: NodeJS.Timeout | undefined;
    const drained = await Promise.race([
      Promise.allSettled([...this.running]).then(() => true),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeout))),
    ]);
    clearTimeout(timer);
    if (!drained) this.logger.warn(shutdownTimeoutMessage(this.running.size, timeout));
  }

  private async close(): Promise<void> {
    await this.beforeApplicationShutdown();
    try {
      await this.engine.close();
    } finally {
      for (const stop of this.unobserve.splice(0)) stop();
      await this.connections.close();
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
      const result = await this.engine.release(lock);
      if (!result.complete) {
        this.logger.debug(
          `Release of ${lock.resources.join(', ')} incomplete: ${result.deleted} master(s) deleted it`,
        );
      }
    } catch (err) {
      this.logger.warn(
        releaseFailedMessage(
          lock.resources,
          redactText(errorMessage(err), this.connections.secrets),
        ),
      );
    }
  }
}

/** Resolves, per client, whether it became ready before its first failure or the timeout. */
async function waitForConnections(
  clients: readonly RedlockClient[],
  timeout: number,
): Promise<boolean[]> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeout)));
  try {
    return await Promise.all(
      clients.map((client) => {
        if (client.status === 'ready') return true;
        let cleanup = (): void => undefined;
        const settled = new Promise<boolean>((resolve) => {
          const onReady = (): void => resolve(true);
          const onFail = (): void => resolve(false);
          client.once('ready', onReady);
          client.once('error', onFail);
          client.once('end', onFail);
          cleanup = () => {
            client.off('ready', onReady);
            client.off('error', onFail);
            client.off('end', onFail);
          };
        });
        return Promise.race([settled, expired.then(() => false)]).finally(cleanup);
      }),
    );
  } finally {
    clearTimeout(timer);
  }
}

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function acquireOptions(
  o: LockedOptions & { onLocked: string },
  signal: AbortSignal | undefined,
): AcquireOptions {
  if (o.onLocked !== 'wait') return { ttl: o.ttl, retryCount: 0, signal };
  return {
    ttl: o.ttl,
    // With a deadline and no explicit count, the deadline alone bounds the wait.
    retryCount: o.retryCount ?? (o.waitTimeout !== undefined ? 1_000_000 : undefined),
    retryDelay: o.retryDelay,
    retryJitter: o.retryJitter,
    waitTimeout: o.waitTimeout,
    signal,
  };
}
