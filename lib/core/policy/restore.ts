import { monotonicNow } from '../base/clock';
import { expire, mintLock } from '../lock/lock';
import type { Lock, LockState } from '../lock/lock';
import { SHARED_SPEC } from '../base/kind-spec';
import type { LockKindSpec } from '../base/kind-spec';
import { checkSerializedLock } from '../lock/portable';
import { driftFor } from '../base/clock';
import { reportLoss, track } from './acquire';
import type { EngineContext } from './context';
import type { Grant } from '../store';

/**
 * `restore(data)`: a lock serialized by another engine over the same masters
 * and key prefix becomes a lock of this one — tracked (held locks, `lost` events, released by
 * `close()`), with its own signal — without any Redis call.
 *
 * Validity, conservatively: the keys' wall-clock expiry − now − drift (ttl × driftFactor + 2 ms,
 * as for a grant), and never more than a fresh grant of the same ttl would have. The wall clock
 * is the only clock two processes share, so their clocks must agree within the drift. A lock whose
 * validity has already ended is restored lost: its signal is aborted, `extend` rejects with
 * `LockLostError` before any Redis call (also with `repairOnExtend`: nothing is re-created),
 * `release` only deletes what is still ours.
 */
export function restoreLock(ctx: EngineContext, data: unknown): Lock {
  const d = checkSerializedLock(data, ctx.settings);
  const mono = monotonicNow();
  const wall = Date.now();
  const toMono = (wallMs: number): number => mono + (wallMs - wall);
  const drift = driftFor(d.ttl, ctx.settings.driftFactor);
  const kind: LockKindSpec | undefined =
    d.kind === 'mutex'
      ? undefined
      : d.kind === 'shared'
        ? SHARED_SPEC
        : { name: 'semaphore', limit: d.limit };
  const validUntil = Math.min(toMono(d.expiresAt - drift), mono + d.ttl - drift);
  const grant: Grant = {
    resources: d.resources,
    token: d.token,
    ttl: d.ttl,
    start: toMono(d.acquiredAt),
    wallStart: d.acquiredAt,
    votes: [],
    // Checked: a token for every resource, or none (prototype-free table: '__proto__' is a name).
    fencingTokens:
      Object.keys(d.fencingTokens).length === 0 ? [] : d.resources.map((r) => d.fencingTokens[r]),
    ended: false,
    ...(kind ? { kind } : {}),
  };
  const state: LockState = {
    validUntil,
    expiresAt: wall + (validUntil - mono),
    keysExpireAt: d.expiresAt,
    ttl: d.ttl,
    extensions: 0,
    released: false,
    votes: [],
    acquiredAt: grant.start,
    grant,
    ...(d.lockAtLeastFor === undefined ? {} : { lockAtLeastFor: d.lockAtLeastFor }),
  };
  const lock = mintLock(ctx.owner, {
    resources: d.resources,
    value: d.token,
    attempts: 0,
    fencingTokens: grant.fencingTokens,
    kind,
    state,
  });
  if (validUntil <= mono) {
    reportLoss(ctx, state);
    expire(lock, state, 'its validity had ended when it was restored');
  } else {
    track(ctx, lock, state);
  }
  state.onEnd ??= ctx.queue; // wakes local waiters, as a grant's end does
  return lock;
}
