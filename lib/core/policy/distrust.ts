/**
 * A master the store stopped trusting while the engine runs (its clock jumped:
 * redis/masters/clock-watch.ts): the locks the engine holds that counted its vote are re-checked
 * at once. A lock is kept when the masters that granted it (its last acquire or extension) still
 * make its quorum without every distrusted master; otherwise its keys may have expired early on
 * too many of them for the grant to stand, and the lock is lost now — its signal aborts with a
 * `LockLostError` naming the master and the jump — instead of at its next extension.
 */
import { formatMs } from '../base/clock';
import { lockState, expire } from '../lock/lock';
import type { Lock, LockState } from '../lock/lock';
import type { MasterDistrust } from '../store';
import type { EngineContext } from './context';

/** Re-checks the held locks after `e`, then tells the observers. */
export function distrusted(ctx: EngineContext, e: MasterDistrust): void {
  const { held, observers } = ctx;
  let lost = 0;
  for (const lock of held.list()) {
    const s = lockState(lock);
    if (s.released || s.lostReason) continue;
    if (!s.votes.some((v) => v.node === e.node && v.outcome === 'ok')) continue;
    if (recheckLock(ctx, lock, s, e)) lost++;
  }
  if (!observers.active) return;
  observers.emit({
    type: 'clock-jump',
    node: e.node,
    name: e.name,
    jump: e.jump,
    cause: e.cause,
    quarantine: e.quarantine,
    lost,
  });
}

/** Why a lock's grant no longer stands: a distrusted master among its granting ones, too few left. */
export interface Shortfall {
  /** The master named in the reason: the one just found, or the first distrusted one. */
  readonly cause: MasterDistrust;
  /** The granting masters whose votes still count. */
  readonly counted: number;
  /** The lock's quorum. */
  readonly need: number;
}

/**
 * Counts the masters that granted the lock of `s` (its last acquire or extension) whose votes
 * still count (`LockStore.distrustOf`): the {@link Shortfall} when a distrusted one is among them
 * (`named`, or found) and the rest fall short of the lock's quorum, otherwise `undefined`. A lock
 * whose votes all still count pays a trust check per granting master.
 */
export function shortfallOf(
  ctx: EngineContext,
  s: LockState,
  named?: MasterDistrust,
): Shortfall | undefined {
  const { store } = ctx;
  if (!store.distrustOf) return undefined;
  let counted = 0;
  let cause = named;
  for (const v of s.votes) {
    if (v.outcome !== 'ok') continue;
    const d = store.distrustOf(v.node);
    if (d) cause ??= d;
    else counted++;
  }
  if (!cause) return undefined;
  const need = store.quorumFor?.(s.grant?.kind) ?? store.quorum;
  return counted >= need ? undefined : { cause, counted, need };
}

/**
 * Re-checks `lock` ({@link shortfallOf}): lost now when its granting masters that still count
 * fall short of its quorum, naming `named` (the master just found) or the first distrusted one;
 * returns whether it was. Run over the held locks by {@link distrusted}, and over each lock as
 * it is handed out (policy/acquire.ts `granted`). An attempt's own grant is checked before it
 * becomes a lock for the caller (policy/acquire.ts `refuseDistrusted`, which refuses it instead):
 * a distrust may be learned between a grant's votes and its hand-out — from a reply read after
 * the votes were counted (another round's, a late one of the same attempt, the fencing raise's),
 * or in the fair mode after an install was heard on the pub/sub connection before the command
 * reply that showed its master's jump (fair/installs.ts).
 */
export function recheckLock(
  ctx: EngineContext,
  lock: Lock,
  s: LockState,
  named?: MasterDistrust,
): boolean {
  const short = shortfallOf(ctx, s, named);
  if (!short) return false;
  expire(
    lock,
    s,
    `master ${short.cause.name}'s ${describeJump(short.cause)}, so it may have dropped the key early; ` +
      `${short.counted} of the masters that granted the lock still count, ${short.need} needed`,
  );
  return true;
}

/** "clock jumped +30 s" / "clock is 30 s ahead of the other masters'". */
export function describeJump(e: Pick<MasterDistrust, 'jump' | 'cause'>): string {
  const size = formatMs(Math.abs(e.jump));
  if (e.cause === 'jumped') return `clock jumped ${e.jump > 0 ? '+' : '-'}${size}`;
  return `clock is ${size} ${e.jump > 0 ? 'ahead of' : 'behind'} the other masters'`;
}
