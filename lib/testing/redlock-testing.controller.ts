import { Injectable } from '@nestjs/common';
import type { Lock } from '../core';
import { InMemoryRedlock } from './in-memory-redlock';
import type { InMemoryHolder } from './in-memory-redlock';

/**
 * Fault controls of {@link RedlockTestingModule}: inject it in a test to make resources look held
 * by another process, to lose a lock while its holder runs, or to simulate losing a majority of
 * masters. Operates on the module's {@link InMemoryRedlock}.
 *
 * @example
 * ```ts
 * const locks = moduleRef.get(RedlockTestingController);
 * locks.hold('order:42');                       // another instance "holds" it
 * await request(app.getHttpServer()).post('/orders/42/pay').expect(423);
 * locks.free('order:42');
 * ```
 */
@Injectable()
export class RedlockTestingController {
  /** @param engine the in-memory engine behind the module's `RedlockService`. */
  constructor(readonly engine: InMemoryRedlock) {}

  /**
   * Makes `resources` look held by someone else for `ttl` ms (default: until {@link free}).
   * Throws when one of them is already held.
   */
  hold(resources: string | readonly string[], ttl?: number): void {
    this.engine.hold(resources, ttl);
  }

  /** Ends holds made with {@link hold}; waiting acquires are woken. Returns whether any ended. */
  free(resources: string | readonly string[]): boolean {
    return this.engine.free(resources);
  }

  /**
   * The lock holding `resource` is lost: the resource becomes free and the holder's signal
   * (`RedlockService.current().signal`, the `using()` routine's signal) aborts with a
   * `LockLostError`. Returns the lost lock, or `undefined` when no lock of this app held it.
   */
  loseLock(resource: string): Lock | undefined {
    return this.engine.loseLock(resource);
  }

  /**
   * `false`: behave as if a majority of masters were down (acquires fail with `NoQuorumError`
   * — HTTP 503 on `@Locked()` handlers — and extensions fail). `true` restores.
   */
  setAvailable(available: boolean): void {
    this.engine.setAvailable(available);
  }

  /** Whether `resource` is held now (by the app or by {@link hold}). */
  isHeld(resource: string): boolean {
    return this.engine.isHeld(resource);
  }

  /** Who holds `resource` now, or `undefined`. */
  holderOf(resource: string): InMemoryHolder | undefined {
    return this.engine.holderOf(resource);
  }

  /** Every resource held now, sorted. */
  heldResources(): string[] {
    return this.engine.heldResources();
  }

  /** Resolves once `resource` is held (e.g. a request reached its locked handler). */
  waitUntilHeld(resource: string, timeoutMs = 2000): Promise<void> {
    return poll(() => this.engine.isHeld(resource), timeoutMs, `${resource} to be held`);
  }

  /** Resolves once `resource` is free (e.g. a handler finished and released). */
  waitUntilFree(resource: string, timeoutMs = 2000): Promise<void> {
    return poll(() => !this.engine.isHeld(resource), timeoutMs, `${resource} to be free`);
  }

  /** Forgets every hold and lock, restores availability. For `afterEach`. */
  reset(): void {
    this.engine.reset();
  }
}

async function poll(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline)
      throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
