import 'reflect-metadata';
import { InvalidConfigurationError } from '../core';
import { lockStorage } from './lock-context';
import { LOCKED_METADATA } from '../redlock.constants';
import { unboundMethodMessage } from '../redlock.messages';

/** A method as stored on a prototype. */
export type AnyMethod = (this: unknown, ...args: unknown[]) => unknown;

/** Runs a `@Locked()` method under its lock. Implemented by `RedlockService`. */
export interface LockedMethodRunner {
  /**
   * Resolves the resources of the call, acquires (or re-enters) the lock, runs `original` with
   * `instance` as `this` inside the lock context and releases. Resolves to `undefined` when the
   * call was skipped (`onLocked: 'skip'`).
   */
  runLockedMethod(
    instance: object,
    original: AnyMethod,
    wrapper: AnyMethod,
    args: unknown[],
  ): Promise<unknown>;
}

/** Property of a `@Locked()` wrapper that points to the original method. */
export const LOCKED_ORIGINAL: unique symbol = Symbol('redlock:original');

const instanceRunners = new WeakMap<object, LockedMethodRunner>();
const classRunners = new WeakMap<object, LockedMethodRunner>();

/** Lets `runner` lock the `@Locked()` methods called on `instance` (done by the explorer). */
export function bindLockedInstance(instance: object, runner: LockedMethodRunner): void {
  instanceRunners.set(instance, runner);
}

/**
 * Lets `runner` lock the `@Locked()` methods of every instance of `cls` that has no instance
 * binding (request-scoped and transient providers, created after init).
 */
export function bindLockedClass(cls: object, runner: LockedMethodRunner): void {
  classRunners.set(cls, runner);
}

/** Removes a class binding made by `runner` (at shutdown). */
export function unbindLockedClass(cls: object, runner: LockedMethodRunner): void {
  if (classRunners.get(cls) === runner) classRunners.delete(cls);
}

/** Whether a function is a `@Locked()` wrapper. */
export function isLockedWrapper(fn: unknown): fn is AnyMethod & { [LOCKED_ORIGINAL]: AnyMethod } {
  return typeof fn === 'function' && LOCKED_ORIGINAL in fn;
}

/**
 * Wraps a method at class-definition time (so that every consumer that captures the method —
 * Nest's router, @nestjs/schedule, event emitters, other services — captures the wrapper).
 * The wrapper:
 * 1. when the `LockedInterceptor` already holds the lock for exactly this handler invocation
 *    (it marks its frame with the handler's `@Locked()` metadata, claimed once), runs the
 *    original directly — one acquisition per call;
 * 2. otherwise asks the runner bound to `this` (by the explorer at init) to lock and run it;
 * 3. refuses to run (rejects) when no module has bound the instance: never runs unlocked.
 *
 * The wrapper keeps the original's `name`, `length` and every own reflect-metadata entry.
 */
export function wrapLockedMethod(original: AnyMethod, displayName: string): AnyMethod {
  if (isLockedWrapper(original)) {
    throw new InvalidConfigurationError(displayName, '@Locked() is applied twice to one method');
  }
  const wrapper = function (this: unknown, ...args: unknown[]): unknown {
    const frame = lockStorage.getStore();
    if (frame?.pending && frame.pending === Reflect.getMetadata(LOCKED_METADATA, wrapper)) {
      frame.pending = undefined;
      return original.apply(this, args);
    }
    const self = this as object | null | undefined;
    const runner =
      self !== null && (typeof self === 'object' || typeof self === 'function')
        ? (instanceRunners.get(self) ?? classRunners.get(self.constructor))
        : undefined;
    if (!runner) {
      return Promise.reject(
        new InvalidConfigurationError(displayName, unboundMethodMessage(displayName)),
      );
    }
    return runner.runLockedMethod(self as object, original, wrapper, args);
  };
  Object.defineProperty(wrapper, 'name', { value: original.name, configurable: true });
  Object.defineProperty(wrapper, 'length', { value: original.length, configurable: true });
  Object.defineProperty(wrapper, LOCKED_ORIGINAL, { value: original });
  copyMetadata(original, wrapper);
  return wrapper;
}

/** Copies every own reflect-metadata entry of `from` to `to`. */
export function copyMetadata(from: object, to: object): void {
  for (const key of Reflect.getOwnMetadataKeys(from)) {
    Reflect.defineMetadata(key, Reflect.getOwnMetadata(key, from), to);
  }
}
