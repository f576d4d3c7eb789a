/**
 * The acquire, from the engine's facade down to the store: one attempt turned into a lock or a
 * typed error ({@link attempt}, {@link tryOnce}; tracked until it settled, so that `close()`
 * waits for it), the grant handed to the caller ({@link granted}), and the bounded loop of
 * attempts in the waiting policy's order ({@link acquireLoop}; docs/REDLOCK.md, "N masters",
 * last paragraph).
 */
import { monotonicNow } from '../base/clock';
import {
  KindMismatchError,
  LockAbortedError,
  LockContendedError,
  NoQuorumError,
  ShuttingDownError,
  WaitTimeoutError,
} from '../base/errors';
import type { LockErrorDetail } from '../base/errors';
import { withFields } from '../base/fields';
import { MUTEX_SPEC } from '../base/kind-spec';
import { grantState, lockState, mintLock, scheduleExpiry } from '../lock/lock';
import type { Lock, LockState } from '../lock/lock';
import type { CheckedAcquire } from '../base/validate';
import type { AttemptOutcome, Grant } from '../store';
import type { AttemptResult } from '../waiting/attempt-result';
import type { EngineContext } from './context';
import { releaseLock } from './release';
import { recheckLock, shortfallOf } from './distrust';
import type { AttemptHints, WaitingPolicy } from '../waiting/waiting';

/**
 * One attempt on the store (the request as the waiting policy's `hints` make it: waiting/waiting.ts
 * `AttemptHints`): a tracked lock, or the typed reason it was not granted. Another kind
 * of lock at a resource rejects with {@link KindMismatchError} once the attempt's clean-up is
 * done: an error the acquire loop does not retry.
 */
export function attemptOnStore(
  ctx: EngineContext,
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
  ctx: EngineContext,
  outcome: AttemptOutcome,
  req: CheckedAcquire,
  attemptNo: number,
  startedAt: number,
): AttemptResult {
  if (outcome.grant) {
    const lock = createLock(ctx, outcome.grant, attemptNo);
    return refuseDistrusted(ctx, lock, req, attemptNo, startedAt) ?? { lock, grant: outcome.grant };
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

/**
 * A grant whose votes were counted before the engine learned that one of its granting masters
 * jumped, so that the masters that still count fall short of its quorum (policy/distrust.ts
 * `shortfallOf`): never handed out. Its keys are released at once and the attempt fails with a
 * {@link NoQuorumError} (`unavailable`) whose votes show those masters `quarantined`, as the
 * next attempt would see them: `acquire` retries like after any attempt without a quorum,
 * `tryAcquire` throws it, and `using()` never runs its routine on a lock already lost.
 */
function refuseDistrusted(
  ctx: EngineContext,
  lock: Lock,
  req: CheckedAcquire,
  attemptNo: number,
  startedAt: number,
): AttemptResult | undefined {
  const s = lockState(lock);
  const short = shortfallOf(ctx, s);
  if (!short) return undefined;
  const { store } = ctx;
  const votes = lock.votes.map((v) => {
    const d = v.outcome === 'ok' ? store.distrustOf?.(v.node) : undefined;
    return d
      ? withFields(v, { outcome: 'quarantined' as const, quarantineRemaining: d.quarantine })
      : v;
  });
  const cleanup = releaseLock(ctx, lock, s, true).then(
    () => undefined,
    () => undefined,
  );
  const error = new NoQuorumError({
    resources: req.resources,
    votes,
    attempts: attemptNo,
    elapsed: monotonicNow() - startedAt,
    reason: 'unavailable',
    quorum: short.need,
  });
  return { error, cleanup };
}

/** Wraps a grant in a lock the engine tracks (held locks, 'lost' events). */
export function createLock(ctx: EngineContext, grant: Grant, attempts: number): Lock {
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
export function track(ctx: EngineContext, lock: Lock, state: LockState): void {
  reportLoss(ctx, state);
  ctx.held.add(lock);
  if (ctx.observers.active) {
    state.watched = true;
    scheduleExpiry(lock, state);
  }
}

/** Reports the loss of the lock of `state` to the observers (a `lost` event) when it happens. */
export function reportLoss(ctx: EngineContext, state: LockState): void {
  state.onLost = ctx.observers; // (no closure per lock: lock/lock.ts, LockLossListener)
}

/**
 * One attempt of the engine, tracked until it and its clean-up settled (`close()` waits for it);
 * a grant that arrives while the engine drains is refused and released ({@link refuseLate}).
 * `hints`: what the waiting policy adds to it (fair mode: `WaitingPolicy.beforeAttempt`).
 */
export function attempt(
  ctx: EngineContext,
  req: CheckedAcquire,
  attemptNo: number,
  startedAt: number,
  hints?: AttemptHints,
): Promise<AttemptResult> {
  return ctx.inflight.track(
    attemptOnStore(ctx, req, attemptNo, startedAt, hints).then((r) =>
      r.lock && ctx.draining.aborted ? refuseLate(ctx, r.lock, req, attemptNo, startedAt) : r,
    ),
  );
}

/**
 * Hands a grant to its caller: its `lockAtLeastFor`, the wake-up of the next local waiter when
 * it ends, the `acquired` event — and the lock lost at once when a master whose vote it needed
 * is distrusted by now (policy/distrust.ts `recheckLock`): a grant that came by a local or
 * fair-mode hand-over, or an attempt's whose distrust became known after that attempt's own check
 * ({@link refuseDistrusted}; replies read together resolve in one run of promise reactions).
 */
export function granted(
  ctx: EngineContext,
  lock: Lock,
  started: number,
  lockAtLeastFor: number | undefined,
): Lock {
  const s = lockState(lock);
  if (lockAtLeastFor !== undefined) s.lockAtLeastFor = lockAtLeastFor;
  // Its release (or loss) wakes the next local waiter of its resources at once.
  s.onEnd ??= ctx.queue; // (no closure per lock: lock/lock.ts, LockEndListener)
  if (ctx.observers.active) {
    ctx.observers.emit({
      type: 'acquired',
      resources: lock.resources,
      lock,
      attempts: lock.attempts,
      waitTime: monotonicNow() - started,
      votes: lock.votes,
    });
  }
  // A master's distrust learned after the votes were counted: lost now (policy/distrust.ts).
  recheckLock(ctx, lock, s);
  return lock;
}

/**
 * `tryAcquire`: one attempt (tracked: {@link attempt}), no queue, no retry: the lock (handed to
 * the caller: {@link granted}), `null` when another holder has it, or the typed error.
 */
export async function tryOnce(
  ctx: EngineContext,
  req: CheckedAcquire,
  started: number,
  lockAtLeastFor: number | undefined,
): Promise<Lock | null> {
  const { observers } = ctx;
  if (req.signal?.aborted) {
    throw new LockAbortedError(
      { resources: req.resources, votes: [], attempts: 0, elapsed: 0 },
      { cause: req.signal.reason },
    );
  }
  const result = await attempt(ctx, req, 1, started).catch((err: unknown) => {
    observers.failed(req.resources, err, started); // a kind mismatch
    throw err;
  });
  if (result.lock) return granted(ctx, result.lock, started, lockAtLeastFor);
  await result.cleanup;
  observers.failed(req.resources, result.error, started);
  if (result.error instanceof LockContendedError) return null;
  throw result.error;
}

/**
 * A grant that arrived after the engine began to drain: never handed out (the caller gets
 * {@link ShuttingDownError}); its keys are deleted on every master at once (no lockAtLeastFor:
 * nobody ever held it).
 */
function refuseLate(
  ctx: EngineContext,
  lock: Lock,
  req: CheckedAcquire,
  attempts: number,
  startedAt: number,
): AttemptResult {
  const cleanup = releaseLock(ctx, lock, lockState(lock), true).then(
    () => undefined,
    () => undefined,
  );
  const error = new ShuttingDownError({
    resources: req.resources,
    votes: [],
    attempts,
    elapsed: monotonicNow() - startedAt,
  });
  return { error, cleanup };
}

/**
 * The longest an acquire may wait: what `retryCount` retries could take at most —
 * `retryCount × (retryDelay + retryJitter)` of delays plus `retryCount + 1` attempts of at most
 * `requestTimeout` each. Time spent queued behind local waiters or sleeping until a holder's
 * expiry counts toward it, so that fewer attempts never mean a longer wait.
 */
export function retryBudget(req: CheckedAcquire, requestTimeout: number): number {
  return (
    req.retryCount * (req.retryDelay + req.retryJitter) + (req.retryCount + 1) * requestTimeout
  );
}

/**
 * Retries an acquire (docs/REDLOCK.md, "N masters", last paragraph) in the engine's local
 * queue: it waits for its turn behind the local waiters of its resources, then attempts until
 * granted, until `retryCount` retries were made, its {@link retryBudget} or `waitTimeout` is
 * spent, or its signal aborts. Between attempts it sleeps — while the holder is alive (it holds
 * a majority and releases are announced) until a release or the holder's expiry, otherwise a
 * random `retryDelay ± retryJitter` (shorter when the holder's key expires sooner). A request
 * that cannot retry (`retryCount: 0` or `waitTimeout: 0`) makes its one attempt at once, like
 * `tryAcquire`. A failed attempt's clean-up is awaited before its error is surfaced.
 */
export async function acquireLoop<W>(
  ctx: EngineContext<W>,
  req: CheckedAcquire,
  start: number,
  lockAtLeastFor: number | undefined,
): Promise<Lock> {
  const deadline = req.waitTimeout === undefined ? Infinity : start + req.waitTimeout;
  const until = Math.min(deadline, start + retryBudget(req, ctx.settings.requestTimeout));
  const { queue } = ctx;
  const ticket: W | undefined =
    req.retryCount > 0 && req.waitTimeout !== 0
      ? queue.join(req.resources, req.kind.name === 'mutex', req.ttl)
      : undefined;
  // No closures here: a queued acquire's memory is this frame (10,000 waiters).
  let attempts = 0;
  let last: AttemptResult | undefined;
  // A refusal not by one plain holder (readers, split votes): writer-waiting flags may be up.
  let flagged = false;
  try {
    for (;;) {
      // A grant the waiting policy obtained for this waiter without an attempt of its own.
      const handed =
        ticket !== undefined &&
        queue.takeGranted?.(ticket, !req.signal?.aborted && !ctx.draining.aborted);
      if (ticket !== undefined && handed) {
        const lock = createLock(ctx, handed, ++attempts);
        queue.granted(ticket, lock, undefined);
        return granted(ctx, lock, start, lockAtLeastFor);
      }
      if (req.signal?.aborted) {
        await last?.cleanup;
        throw new LockAbortedError(detailOf(req, last, attempts, start), {
          cause: req.signal.reason,
        });
      }
      if (ctx.draining.aborted) {
        await last?.cleanup;
        throw new ShuttingDownError(detailOf(req, last, attempts, start));
      }
      if (ticket !== undefined && !queue.admitted(ticket)) {
        // Queued behind local waiters (or a local holder): sleep until the turn comes.
        const now = monotonicNow();
        if (now >= until)
          return await giveUp(queue, ticket, req, last, attempts, start, now >= deadline);
        await queue.sleep(ticket, Math.min(until, queue.holdersEnd(ticket)), req.signal);
        continue;
      }
      attempts++;
      const sentAt = monotonicNow();
      // Fair mode: a local hand-over to take, a deferral, the wait start (fair/fair-queue.ts).
      const hints = ticket !== undefined ? queue.beforeAttempt?.(ticket) : undefined;
      let result: AttemptResult | undefined;
      try {
        result = await attempt(ctx, req, attempts, start, hints);
      } finally {
        hints?.settle?.(result);
      }
      last = result;
      if (!last.lock && last.error instanceof LockContendedError && last.heldBy === undefined)
        flagged = true;
      if (last.lock) {
        if (ticket !== undefined) queue.granted(ticket, last.lock, last);
        return granted(ctx, last.lock, start, lockAtLeastFor);
      }
      if (last.error instanceof ShuttingDownError) {
        await last.cleanup; // granted while the engine drained: released, never handed out
        throw last.error;
      }
      if (attempts > req.retryCount) {
        return await giveUp(queue, ticket, req, last, attempts, start, false);
      }
      const now = monotonicNow();
      if (now >= until)
        return await giveUp(queue, ticket, req, last, attempts, start, now >= deadline);
      const error = last.error;
      const contended = error instanceof LockContendedError;
      let live = false;
      if (ticket !== undefined && contended) {
        // (`released`: the holder's release was announced before this refusal was read.)
        // (When the attempt was sent, wall clock: the engine's wait start.)
        const sentWall = Date.now() - (monotonicNow() - sentAt);
        const released = queue.refused(ticket, error.votes, last.heldBy, sentWall, last.outcome);
        const watch = await queue.watch(ticket, sentAt);
        if (watch.fresh) continue; // a release may have been missed while subscribing
        if (released === 'retry') continue;
        // A refusal that names no holder whose release would wake the waiter: it polls.
        live = watch.live && released === undefined && !(hints?.polls && last.heldBy === undefined);
      }
      // The algorithm's order (docs/REDLOCK.md, "N masters": step 5, then the random delay):
      // release where the failed attempt may have set keys, then wait — from when that
      // clean-up is done, so that contenders whose attempts split do not race again while their
      // keys are still there, each refused by the others' (a wake-up meanwhile is not lost: the
      // waiting policy hands it to the next sleep).
      if (last.cleanup) await last.cleanup;
      const wait = waitAfter(error, req, ctx.store.quorum, live);
      // Only queued acquires get here (the others cannot retry).
      await queue.sleep(ticket as W, Math.min(until, monotonicNow() + wait), req.signal);
    }
  } catch (err) {
    // Its writer flags end (none can be up when every refusal named one plain holder).
    if (flagged && req.writerWait > 0) ctx.store.writerGaveUp?.(req.resources);
    ctx.observers.failed(req.resources, err, start);
    throw err;
  } finally {
    if (ticket !== undefined) queue.leave(ticket);
  }
}

/** The detail of an acquire's error: its resources, the last attempt's votes, time spent. */
function detailOf(
  req: CheckedAcquire,
  last: AttemptResult | undefined,
  attempts: number,
  start: number,
): LockErrorDetail {
  return {
    resources: req.resources,
    votes: last?.lock ? [] : (last?.error.votes ?? []),
    attempts,
    elapsed: monotonicNow() - start,
  };
}

/** Ends the wait without a lock: after the last attempt's clean-up, with its error as cause. */
async function giveUp<W>(
  queue: WaitingPolicy<W>,
  ticket: W | undefined,
  req: CheckedAcquire,
  last: AttemptResult | undefined,
  attempts: number,
  start: number,
  timedOut: boolean,
): Promise<never> {
  await last?.cleanup;
  const base = detailOf(req, last, attempts, start);
  const cause =
    last && !last.lock
      ? last.error
      : ticket !== undefined
        ? queue.contended(ticket, base)
        : new LockContendedError(base);
  if (!timedOut) throw cause;
  throw new WaitTimeoutError(withFields(base, { waitTimeout: req.waitTimeout ?? 0 }), { cause });
}

/**
 * How long to sleep after a refused attempt (a release announcement or a local release ends it
 * sooner). While the holder is alive — a majority of the votes were `held` — and releases are
 * announced (`live`), until the holder's key expires plus a random part of `retryJitter`: no
 * polling. Otherwise (split votes, failed masters, no announcements) the random
 * `retryDelay ± retryJitter` of the algorithm, at most until the holder's expiry.
 */
export function waitAfter(
  error: LockContendedError | NoQuorumError,
  req: CheckedAcquire,
  quorum: number,
  live: boolean,
): number {
  const holderTtl = error instanceof LockContendedError ? error.retryAfter : undefined;
  const held = error.votes.filter((v) => v.outcome === 'held').length;
  if (live && holderTtl !== undefined && held >= quorum) {
    return holderTtl + 1 + Math.random() * req.retryJitter;
  }
  const wait = req.retryDelay + (Math.random() * 2 - 1) * req.retryJitter;
  return Math.max(0, holderTtl === undefined ? wait : Math.min(wait, holderTtl + 1));
}
