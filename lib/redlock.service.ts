import { loadTransportExceptions } from './errors/transport.error';
import { connectionOf } from './core/redis/connection/adapt';
import { Inject, Injectable, Logger } from '@nestjs/common';
import type {
  BeforeApplicationShutdown,
  OnApplicationShutdown,
  OnModuleInit,
} from '@nestjs/common';
import type {
  AcquireOptions,
  Lock,
  LockedRoutine,
  Redlock,
  RedlockClient,
  ReleaseResult,
  ReleaseOptions,
  ResourceInspection,
  UsingOptions,
} from './core';
import type { LockContext, ResolvedRedlockModuleOptions } from './interfaces';
import { LockedRunner } from './locked/locked-runner';
import type { RedlockBackend } from './redlock.backend';
import {
  REDLOCK_BACKEND,
  REDLOCK_LOGGER_CONTEXT,
  REDLOCK_MODULE_OPTIONS,
} from './redlock.constants';
import { startupUnreachableMessage } from './redlock.messages';
import { checkIndependentMasters } from './master-identity';

/**
 * Distributed locks for Nest applications: the engine of the module (injected, see
 * `REDLOCK_BACKEND`), its lifecycle — connections at startup, drain and release at shutdown —
 * and the call-chain lock context used by `@Locked()` (through {@link LockedRunner}).
 */
@Injectable()
export class RedlockService
  implements OnModuleInit, BeforeApplicationShutdown, OnApplicationShutdown
{
  /** The underlying engine. */
  readonly engine: Redlock;
  private readonly logger = new Logger(REDLOCK_LOGGER_CONTEXT);
  private draining: Promise<void> | undefined;
  private shutdown: Promise<void> | undefined;

  constructor(
    /** The resolved module options. */
    @Inject(REDLOCK_MODULE_OPTIONS) readonly options: ResolvedRedlockModuleOptions,
    @Inject(REDLOCK_BACKEND) private readonly backend: RedlockBackend,
    private readonly runner: LockedRunner,
  ) {
    this.engine = backend.engine;
  }

  /** The clients, one per master, in the order of the `clients` option. */
  get clients(): readonly RedlockClient[] {
    return this.backend.clients;
  }

  /** Display names of the masters, passwords redacted, in order. */
  get masterNames(): readonly string[] {
    return this.backend.names;
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

  /**
   * Releases a lock on every master (or, before its `lockAtLeastFor` has passed, keeps the keys
   * until then; `options.lockAtLeastFor` overrides the lock's own value). Resolves once every
   * master answered, or with `options.wait: 'quorum'` once a quorum deleted it.
   */
  release(lock: Lock, options?: ReleaseOptions): Promise<ReleaseResult> {
    return this.engine.release(lock, options);
  }

  /**
   * Takes over a lock serialized by another process (`JSON.stringify(lock)` there,
   * `restore(JSON.parse(text))` here): a lock of this application's engine that can be extended
   * and released here (see the engine's `restore`). Throws `InvalidLockDataError` for anything
   * that is not a valid serialized lock.
   */
  restore(data: unknown): Lock {
    return this.engine.restore(data);
  }

  /** Extends a lock to `ttl` ms from now (default: its current ttl). */
  extend(lock: Lock, ttl?: number): Promise<Lock> {
    return this.engine.extend(lock, ttl);
  }

  /**
   * What a quorum of masters agrees on about `resource`, read-only (see the engine's `inspect`):
   * `{ resource, locked, holders, ttl }`. Throws `NoQuorumError` when too few masters answered.
   */
  inspect(resource: string): Promise<ResourceInspection> {
    return this.engine.inspect(resource);
  }

  /** Whether a quorum of masters agrees that `resource` is held (read-only). */
  isLocked(resource: string): Promise<boolean> {
    return this.engine.isLocked(resource);
  }

  /**
   * Acquires, runs `routine(signal, lock)` with automatic extension, and always releases.
   * The routine runs inside the lock context: `current()` returns this lock there. Not
   * reentrant: a routine that asks for a resource its own chain holds will contend with itself
   * (use `@Locked()` methods for reentrancy).
   */
  using<T>(
    resources: string | string[],
    routine: LockedRoutine<T>,
    options?: UsingOptions,
  ): Promise<T> {
    return this.runner.using(resources, routine, options);
  }

  /**
   * The lock held by the current call chain (a `@Locked()` method or a `using()` routine, and
   * everything they call), or `undefined` outside of one. With `resources`, the innermost lock
   * that covers all of them.
   */
  current(resources?: string | string[]): LockContext | undefined {
    return this.runner.current(resources);
  }

  /**
   * Startup: waits until every master answered its first connection attempt (at most the
   * clients' `connectTimeout`), so that locks taken right after bootstrap (e.g. by scheduled
   * jobs) do not fail merely because the connections were still opening. Masters that are down
   * do not fail the bootstrap: they are reported, and locks work as soon as a quorum is reachable.
   * Masters that are not independent — one server listed twice under different names (same
   * `run_id`), a replica of another listed master — fail it with an `InvalidConfigurationError`
   * naming the positions. Masters that cannot vote for other reasons (a replica of an unlisted
   * master, a Sentinel, an ACL without scripting) are reported by the engine's log and `health()`.
   */
  async onModuleInit(): Promise<void> {
    await loadTransportExceptions();
    const timeout = Math.min(
      10_000,
      Math.max(100, this.options.clientOptions.connectTimeout ?? 2000),
    );
    const clients = this.backend.clients;
    const ready = await waitForConnections(clients, timeout);
    const down = this.backend.names.filter((_, i) => i < clients.length && !ready[i]);
    if (down.length > 0) {
      this.logger.warn(startupUnreachableMessage(down, clients.length, this.engine.quorum));
    }
    const duplicate = await checkIndependentMasters(clients, this.backend.names, timeout);
    if (duplicate) {
      // The bootstrap fails: close what the module opened (Nest will not, for a failed init).
      await this.onApplicationShutdown();
      throw duplicate;
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
    await this.runner.settle(this.options.shutdownTimeout);
  }

  private async close(): Promise<void> {
    await this.beforeApplicationShutdown();
    await this.backend.close();
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
        const connection = connectionOf(client);
        if (connection.isReady) return true;
        let cleanup = (): void => undefined;
        const settled = new Promise<boolean>((resolve) => {
          const onReady = (): void => resolve(true);
          const onFail = (): void => resolve(false);
          connection.on('ready', onReady);
          connection.on('error', onFail);
          connection.on('close', onFail);
          cleanup = () => {
            connection.off('ready', onReady);
            connection.off('error', onFail);
            connection.off('close', onFail);
          };
        });
        return Promise.race([settled, expired.then(() => false)]).finally(cleanup);
      }),
    );
  } finally {
    clearTimeout(timer);
  }
}
