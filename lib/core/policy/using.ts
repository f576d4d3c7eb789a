import { withFields } from '../base/fields';
import { InvalidArgumentError } from '../base/errors';
import type { Lock, ReleaseResult } from '../lock/lock';
import type { ResolvedSettings } from '../base/settings';
import type { LockedRoutine } from '../lock/lock';
import type { AcquireOptions, UsingOptions } from '../base/types';
import { takeLockAtLeastFor } from './release';
import {
  USING_OPTION_NAMES,
  argError,
  checkAcquire,
  checkBoolean,
  checkExtendThreshold,
  checkNames,
  checkObject,
  describe,
} from '../base/validate';

/** What `using()` needs from the engine. */
export interface UsingEngine {
  readonly settings: ResolvedSettings;
  acquire(resources: string | readonly string[], options: AcquireOptions): Promise<Lock>;
  keepAlive(lock: Lock, extendThreshold?: number): () => void;
  release(lock: Lock): Promise<ReleaseResult>;
}

/**
 * `using()`: acquires, runs `routine(signal, lock)`, extends the lock automatically before it
 * expires and always releases. A release error never masks the routine's result or error (it
 * goes to the logger, redacted by `describeError`). No timer outlives the call.
 */
export async function runUsing<T>(
  engine: UsingEngine,
  resources: string | readonly string[],
  routine: LockedRoutine<T>,
  options: UsingOptions,
  describeError: (err: unknown) => string,
): Promise<T> {
  if (typeof routine !== 'function')
    throw new InvalidArgumentError('routine', `must be a function, got ${describe(routine)}`);
  checkObject('options', options, argError);
  const { settings } = engine;
  // lockAtLeastFor: checked here, kept on the lock, honoured by the release below.
  const { rest, lockAtLeastFor } = takeLockAtLeastFor(options, settings);
  checkNames(rest, USING_OPTION_NAMES, argError, '', 'option');
  const { autoExtend = true, extendThreshold, ...acquireOptions } = rest;
  checkBoolean('autoExtend', autoExtend, argError);
  const ttl = checkAcquire(resources, acquireOptions, settings).ttl;
  const threshold =
    extendThreshold === undefined
      ? undefined
      : checkExtendThreshold('extendThreshold', extendThreshold, ttl, argError);
  const lock = await engine.acquire(
    resources,
    lockAtLeastFor === undefined ? acquireOptions : withFields(acquireOptions, { lockAtLeastFor }),
  );
  const stop = autoExtend ? engine.keepAlive(lock, threshold) : () => undefined;
  try {
    return await routine(lock.signal, lock);
  } finally {
    stop();
    await engine.release(lock).then(
      (r) => {
        if (!r.complete)
          settings.logger.debug?.(`Redlock: release of ${lock.resources.join(', ')} incomplete`);
      },
      (err: unknown) => settings.logger.warn(`Redlock: release failed: ${describeError(err)}`),
    );
  }
}
