import { monotonicNow } from '../clock';
import { KindMismatchError, LockAbortedError, LockContendedError, NoQuorumError } from '../errors';
import { withFields } from '../fields';
import { MUTEX_SPEC } from '../kind-spec';
import type { LockErrorDetail } from '../errors';
import type { HeldLocks } from '../held';
import { grantState, mintLock, scheduleExpiry } from '../lock';
import type { Lock, LockOwner, LockState } from '../lock';
import type { CheckedAcquire } from '../request';
import type { ResolvedSettings } from '../settings';
import type { LoopContext } from './acquire-loop';
import type { AttemptResult } from './attempt-result';
import type { Observers } from './observers';
import type { AttemptOutcome, Grant, LockStore } from '../store';
import type { AttemptHints } from './waiting';

/** What an attempt needs from the engine. */
export interface AttemptContext {
  /** The engine the locks belong to (the only one that may release or extend them). */
  readonly owner: LockOwner;
  readonly store: LockStore;
  readonly settings: ResolvedSettings;
  readonly observers: Observers;
  readonly held: HeldLocks;
}

/**
 * One attempt on the store (the request as the waiting policy's `hints` make it: policy/waiting.ts
 * `AttemptHints`): a tracked lock, or the typed reason it was not granted. Another kind
 * of lock at a resource rejects with {@link KindMismatchError} once the attempt's clean-up is
 * done: an error the acquire loop does not retry.
 */
export function attemptOnStore(
  ctx: AttemptContext,
  req: CheckedAcquire,
  attemptNo: number,
  startedAt: number,
  hints?: AttemptHints,
): Promise<AttemptResult> {
  // A retry of a plain lock that waits for readers takes the writer-waiting flags down where it
  // is granted (docs/lock-kinds.md); a first attempt has raised none (no read, no write).
  const sent =
    attemptNo > 1 && req.writerWait > 0 ? withFields(req, { clearWriterFlags: true }) : req;
  return ctx.store
    .attempt(hints === undefined ? sent : hints.request(sent))
    .then((outcome) =>
      outcome.grant || outcome.refusal !== 'kind-mismatch'
        ? resultOf(ctx, outcome, req, attemptNo, startedAt)
        : Promise.resolve(outcome.cleanup).then(() =>
            resultOf(ctx, outcome, req, attemptNo, startedAt),
          ),
    );
}

function resultOf(
  ctx: AttemptContext,
  outcome: AttemptOutcome,
  req: CheckedAcquire,
  attemptNo: number,
  startedAt: number,
): AttemptResult {
  if (outcome.grant) {
    return { lock: createLock(ctx, outcome.grant, attemptNo), grant: outcome.grant };
  }
  const detail: LockErrorDetail = {
    resources: req.resources,
    votes: outcome.votes,
    attempts: attemptNo,
    elapsed: monotonicNow() - startedAt,
  };
  if (outcome.refusal === 'kind-mismatch') {
    const requested = req.kind ?? MUTEX_SPEC;
    const found = outcome.found ?? { kind: 'foreign' as const, redisType: 'unknown' };
    throw new KindMismatchError(withFields(detail, { requested, found }));
  }
  const error =
    outcome.refusal === 'contended'
      ? new LockContendedError(detail)
      : new NoQuorumError(
          withFields(detail, {
            reason: outcome.refusal,
            quorum: outcome.quorum ?? ctx.store.quorum,
          }),
        );
  return {
    error,
    cleanup: outcome.cleanup,
    heldBy: outcome.heldBy,
    outcome,
  };
}

/** Wraps a grant in a lock the engine tracks (held locks, 'lost' events). */
export function createLock(ctx: AttemptContext, grant: Grant, attempts: number): Lock {
  const state = grantState(grant, ctx.settings.driftFactor);
  const lock = mintLock(ctx.owner, {
    resources: grant.resources,
    value: grant.token,
    attempts,
    fencingTokens: grant.fencingTokens,
    state,
    kind: grant.kind,
  });
  track(ctx, lock, state);
  return lock;
}

/**
 * Tracks a lock of this engine (a grant, or a restored lock: policy/restore.ts): in the held set,
 * and reported `lost` when it is lost — when it happens while someone observes, not only when
 * the holder next touches the lock.
 */
export function track(ctx: AttemptContext, lock: Lock, state: LockState): void {
  reportLoss(ctx, lock, state);
  ctx.held.add(lock);
  if (ctx.observers.active) {
    state.watched = true;
    scheduleExpiry(lock, state);
  }
}

/** Reports the loss of `lock` to the observers (a `lost` event) when it happens. */
export function reportLoss(ctx: AttemptContext, lock: Lock, state: LockState): void {
  const { observers } = ctx;
  state.onLost = (reason) => {
    if (observers.active) {
      observers.emit({
        type: 'lost',
        resources: lock.resources,
        lock,
        holdTime: monotonicNow() - state.acquiredAt,
        reason,
      });
    }
  };
}

/**
 * `tryAcquire`: one attempt (through the engine's tracked `attempt`, so that `close()` waits for
 * it), no queue, no retry: the lock, `null` when another holder has it, or the typed error.
 */
export async function tryOnce(
  loop: Pick<LoopContext, 'attempt'>,
  observers: Observers,
  req: CheckedAcquire,
  started: number,
): Promise<Lock | null> {
  if (req.signal?.aborted) {
    throw new LockAbortedError(
      { resources: req.resources, votes: [], attempts: 0, elapsed: 0 },
      { cause: req.signal.reason },
    );
  }
  const result = await loop.attempt(req, 1, started).catch((err: unknown) => {
    observers.failed(req.resources, err, started); // a kind mismatch
    throw err;
  });
  if (result.lock) return result.lock;
  await result.cleanup;
  observers.failed(req.resources, result.error, started);
  if (result.error instanceof LockContendedError) return null;
  throw result.error;
}
