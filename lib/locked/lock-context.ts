import { AsyncLocalStorage } from 'node:async_hooks';
import type { Lock } from '../core';
import type { LockContext } from '../interfaces';

/**
 * One step of a call chain's lock stack. Frames are immutable links (`parent`), so concurrent
 * branches of one chain (e.g. `Promise.all` inside a locked method) never see each other's
 * nested locks, and two independent requests never share a frame.
 */
export interface LockFrame {
  /** The `RedlockService` that owns the frame: reentrancy only applies within one engine. */
  readonly owner: object;
  /** Enclosing frame, if any. */
  readonly parent: LockFrame | undefined;
  /** The lock acquired by this frame; `undefined` for a reentrant call that acquired nothing. */
  readonly context: LockContext | undefined;
  /**
   * The `@Locked()` metadata of the handler the interceptor has already locked for; the first
   * method wrapper carrying that same metadata object claims it (once) instead of locking a
   * second time. Matching the metadata object (not the function) also works when another
   * decorator wrapped the method above `@Locked()`.
   */
  pending: object | undefined;
}

/** The async-context storage of lock frames, shared by every module instance. */
export const lockStorage = new AsyncLocalStorage<LockFrame>();

/** A {@link LockContext} view of an engine lock. */
export class LockContextView implements LockContext {
  constructor(
    /** The engine's lock object. */
    readonly lock: Lock,
  ) {}

  /** Locked resources. */
  get resources(): readonly string[] {
    return this.lock.resources;
  }

  /** The lock's ownership token. */
  get token(): string {
    return this.lock.value;
  }

  /** Fencing token per resource. */
  get fencingTokens(): Readonly<Record<string, number>> {
    return this.lock.fencingTokens;
  }

  /** Fencing token of the first resource. */
  get fencingToken(): number | undefined {
    return this.lock.fencingToken;
  }

  /** Milliseconds of validity left. */
  get remainingValidity(): number {
    return this.lock.remainingValidity;
  }

  /** Aborts when the lock is lost. */
  get signal(): AbortSignal {
    return this.lock.signal;
  }
}

/** Frames of `owner` in the current chain, innermost first. */
export function framesOf(owner: object, from = lockStorage.getStore()): LockFrame[] {
  const out: LockFrame[] = [];
  for (let f = from; f; f = f.parent) if (f.owner === owner) out.push(f);
  return out;
}

/**
 * The innermost lock context of `owner` in the current chain that covers every resource in
 * `resources` (or the innermost at all when none are given).
 */
export function findContext(owner: object, resources?: readonly string[]): LockContext | undefined {
  for (const f of framesOf(owner)) {
    if (!f.context) continue;
    if (!resources || resources.every((r) => f.context?.resources.includes(r))) return f.context;
  }
  return undefined;
}
