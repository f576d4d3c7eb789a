import type { Lock } from '../core/lock/lock';
import { Redlock } from '../core/redlock';
import { argError, checkInteger, normalizeResources } from '../core/base/validate';
import type { RedlockSettings } from '../core/base/settings';
import { MAX_TIMER_MS, monotonicNow } from '../core/base/clock';
import { InMemoryStore } from './in-memory-store';
import type { InMemoryHolder } from './in-memory-store';

export type { InMemoryHolder } from './in-memory-store';

/**
 * Settings of an {@link InMemoryRedlock}: the engine settings that mean something without Redis.
 * (`quorum`, `quarantine`, `handoff` and `requestTimeout` are about masters and are ignored.)
 */
export type InMemoryRedlockSettings = Omit<
  RedlockSettings,
  'quorum' | 'quarantine' | 'handoff' | 'requestTimeout'
>;

/**
 * A single-process stand-in for the {@link Redlock} engine, for tests that must not need Redis.
 *
 * It is the real engine — same methods, same {@link Lock} objects (validity, signal, fencing
 * tokens, extensions), same errors, the same acquire loop, `tryAcquire`, `release`, `extend`,
 * `using()`, `keepAlive()`, validation and events — over an in-process store
 * (in-memory-store.ts) with real exclusion and ttl expiry instead of Redis masters.
 *
 * On top, fault controls for tests: {@link hold} / {@link free} a resource as if another
 * process held it, {@link loseLock} (the holder's signal aborts with a `LockLostError`),
 * {@link setAvailable} (every operation fails with `NoQuorumError`, as when a majority of
 * masters is down).
 *
 * Shared locks (`shared: true`) and semaphores (`limit: n`) follow the Redis engine's rules:
 * readers together, a plain lock excluded (and not starved: a waiting plain lock holds back new
 * readers), at most `n` semaphore holders, and `KindMismatchError` when kinds are mixed.
 */
export class InMemoryRedlock extends Redlock {
  private readonly memory: InMemoryStore;

  /** @param settings engine settings (ttl, maxTtl, retries, drift, fencing, ...). */
  constructor(settings: InMemoryRedlockSettings = {}) {
    const memory = new InMemoryStore();
    super(memory.factory(), {
      ...(settings as RedlockSettings),
      quorum: undefined,
      quarantine: false,
      handoff: false,
      // Meaningless without network; set below any valid ttl (> 1) so validation accepts it.
      requestTimeout: 1,
    });
    this.memory = memory;
  }

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
    this.memory.hold(list, until);
  }

  /** Ends holds made with {@link hold}. Returns `true` when something was freed. */
  free(resources: string | readonly string[]): boolean {
    return this.memory.free(normalizeResources(resources));
  }

  /**
   * Simulates the loss of the lock that holds `resource` (its key vanished from a majority of
   * masters): the resource becomes free, the holder's `signal` aborts with a `LockLostError`
   * and its next extension fails. Returns the lost lock, if one held it.
   */
  loseLock(resource: string): Lock | undefined {
    const [r] = normalizeResources(resource);
    return this.memory.loseLock(r);
  }

  /**
   * `false` simulates losing a majority of masters: acquires fail with `NoQuorumError`,
   * extensions fail (locks run out their validity), releases delete nothing. `true` restores.
   */
  setAvailable(available: boolean): void {
    this.memory.setAvailable(available);
  }

  /** Who holds `resource` now (expired holds are dropped), or `undefined` when it is free. */
  holderOf(resource: string): InMemoryHolder | undefined {
    return this.memory.holderOf(resource);
  }

  /** Every holder of `resource` now: several for shared locks and semaphores, none when free. */
  holdersOf(resource: string): InMemoryHolder[] {
    return this.memory.holdersOf(resource);
  }

  /** Whether `resource` is held (by a lock of this engine or by {@link hold}). */
  isHeld(resource: string): boolean {
    return this.holderOf(resource) !== undefined;
  }

  /** Resources held right now, sorted. */
  heldResources(): string[] {
    return this.memory.heldResources();
  }

  /**
   * Forgets every hold and lock entry (locks already handed out lose their resources: their
   * signals abort) and restores availability. Fencing counters keep increasing.
   */
  reset(): void {
    this.memory.reset();
  }
}
