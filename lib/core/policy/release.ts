import { monotonicNow } from '../base/clock';
import { expire, markReleased } from '../lock/lock';
import type { Lock, LockState, ReleaseResult } from '../lock/lock';
import type { ResolvedSettings } from '../base/settings';
import type { ReleaseOptions, ReleaseWait } from '../base/types';
import { argError, checkInteger, checkNames, checkObject, describe } from '../base/validate';
import type { EngineContext } from './context';
import type { Grant } from '../store';

const RELEASE_OPTION_NAMES = Object.freeze(['lockAtLeastFor', 'wait'] as const);

/** The values of `ReleaseOptions.wait`. */
const RELEASE_WAITS: readonly ReleaseWait[] = ['all', 'quorum'];

/**
 * Checks a `lockAtLeastFor` value: an integer in [0, maxTtl]. The restart quarantine is sized
 * from `maxTtl` (a master that restarted empty must not vote before every key it held has
 * expired), so no key may be kept longer than that.
 */
export function checkLockAtLeastFor(field: string, value: unknown, s: ResolvedSettings): number {
  return checkInteger(field, value, 0, s.maxTtl, argError);
}

/**
 * Splits `lockAtLeastFor` off acquire (or `using`) options, checked; the rest goes to the usual
 * checks. Anything that is not an options object is passed on unchanged (and refused there).
 */
export function takeLockAtLeastFor<T extends object>(
  options: T & { lockAtLeastFor?: number },
  s: ResolvedSettings,
): { rest: T; lockAtLeastFor: number | undefined } {
  if (
    options === null ||
    typeof options !== 'object' ||
    Array.isArray(options) ||
    !Object.prototype.hasOwnProperty.call(options, 'lockAtLeastFor')
  ) {
    return { rest: options, lockAtLeastFor: undefined };
  }
  const { lockAtLeastFor, ...rest } = options;
  return {
    rest: rest as T,
    lockAtLeastFor:
      lockAtLeastFor === undefined
        ? undefined
        : checkLockAtLeastFor('lockAtLeastFor', lockAtLeastFor, s),
  };
}

/**
 * Checks the options of `release` (typed errors): the `lockAtLeastFor` in force, if any, and
 * whether the release resolves at a quorum (`wait: 'quorum'`).
 */
export function checkReleaseOptions(
  options: unknown,
  s: ResolvedSettings,
): { lockAtLeastFor?: number; atQuorum?: boolean } {
  if (options === undefined) return {};
  checkNames(
    checkObject('options', options, argError),
    RELEASE_OPTION_NAMES,
    argError,
    '',
    'option',
  );
  const { lockAtLeastFor: value, wait } = options as ReleaseOptions;
  if (wait !== undefined && !RELEASE_WAITS.includes(wait)) {
    throw argError('wait', `must be 'all' or 'quorum', got ${describe(wait)}`);
  }
  return {
    lockAtLeastFor:
      value === undefined ? undefined : checkLockAtLeastFor('lockAtLeastFor', value, s),
    atQuorum: wait === 'quorum',
  };
}

/**
 * Releases `lock` (the holder's side ends now: marked released, out of the held set, its
 * keep-alive stops at its next tick, its signal does not abort). On the masters:
 * compare-and-delete, announced to waiters — or, while the lock's `lockAtLeastFor` has not
 * passed since the grant, compare-and-pexpire of its keys to the remainder, not announced (the
 * resource stays locked until then; keys no longer ours are untouched). A plain lock that the
 * next local waiter may take is handed over to it instead, where the waiting policy does that
 * (`WaitingPolicy.handover`; fair mode: fair/handover.ts). `waitAll`: no hand-over (closing, the
 * clean-up of an attempt); `atQuorum`: resolve once a quorum deleted (`ReleaseOptions.wait`).
 */
export async function releaseLock(
  ctx: EngineContext,
  lock: Lock,
  s: LockState,
  waitAll: boolean,
  lockAtLeastFor = s.lockAtLeastFor,
  atQuorum = false,
): Promise<ReleaseResult> {
  const now = monotonicNow();
  if (!s.released && s.validUntil <= now) {
    expire(lock, s, 'its validity ended before it was released');
  }
  const remainder =
    lockAtLeastFor === undefined ? 0 : Math.ceil(s.acquiredAt + lockAtLeastFor - now);
  // Never longer than maxTtl (the restart quarantine is sized from it).
  const keepFor = remainder > 0 ? Math.min(remainder, ctx.settings.maxTtl) : undefined;
  const grant = s.grant as Grant;
  // A valid lock released for good may go straight to the next local waiter (one round).
  const handover =
    !s.released && !s.lostReason && keepFor === undefined && !waitAll && !grant.kind
      ? ctx.queue.handover?.(lock, grant)
      : undefined;
  if (handover) s.onEnd = undefined; // the queue woke its taker already
  markReleased(lock, s);
  ctx.held.delete(lock);
  let result: ReleaseResult;
  if (handover) {
    result = await handover.finish(grant); // (no hand-over with waitAll)
  } else {
    // By default every master's answer (or its timeout), not a quorum's: the result — and the
    // `released` event, and what callers log from it — says whether every master deleted its
    // key; `atQuorum`, a quorum's (the other deletes are on the wire already). The waiting
    // policy may send it its own way (fair mode: a yield or a pass); kept keys are a plain
    // compare-and-pexpire.
    result =
      keepFor === undefined && ctx.queue.release
        ? await ctx.queue.release(lock, grant)
        : await ctx.store.release(grant, waitAll || !atQuorum, keepFor);
  }
  if (ctx.observers.active) {
    const end = monotonicNow();
    ctx.observers.emit({
      type: 'released',
      resources: lock.resources,
      lock,
      holdTime: end - s.acquiredAt,
      duration: end - now,
      result,
    });
  }
  return result;
}
