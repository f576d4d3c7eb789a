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
  const out = new Set(e.distrusted);
  let lost = 0;
  for (const lock of held.list()) {
    const s = lockState(lock);
    if (s.released || s.lostReason) continue;
    if (!s.votes.some((v) => v.node === e.node && v.outcome === 'ok')) continue;
    let counted = 0;
    for (const v of s.votes) if (v.outcome === 'ok' && !out.has(v.node)) counted++;
    if (lostOver(ctx, lock, s, counted, e)) lost++;
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

/**
 * A lock being handed out (policy/acquire.ts `granted`), against the masters whose votes do
 * not count now. {@link distrusted} re-checks the held locks only, and a distrust may be learned
 * between a grant's votes and its hand-out: from a reply read after the votes were counted
 * (another round's, or a late one of the same attempt), or — in the fair mode — after an install
 * was heard on the pub/sub connection before the command reply that showed its master's jump
 * (fair/installs.ts). Such a lock is lost at once (its signal aborted, the same reason) when the
 * masters that granted it no longer make its quorum. A lock whose votes all still count pays a
 * trust check per granting master.
 */
export function recheckHanded(ctx: EngineContext, lock: Lock, s: LockState): void {
  const { distrustOf } = ctx.store;
  if (!distrustOf) return;
  let counted = 0;
  let cause: DistrustCause | undefined;
  for (const v of s.votes) {
    if (v.outcome !== 'ok') continue;
    const d = distrustOf.call(ctx.store, v.node);
    if (d) cause ??= d;
    else counted++;
  }
  if (cause) lostOver(ctx, lock, s, counted, cause);
}

/** What a master's distrust says about itself (its name, its jump or disagreement). */
type DistrustCause = Pick<MasterDistrust, 'name' | 'jump' | 'cause'>;

/**
 * Expires `lock` when `counted` of its granting masters (those that still count after `e`) fall
 * short of its quorum; whether it did.
 */
function lostOver(
  ctx: EngineContext,
  lock: Lock,
  s: LockState,
  counted: number,
  e: DistrustCause,
): boolean {
  const need = ctx.store.quorumFor?.(s.grant?.kind) ?? ctx.store.quorum;
  if (counted >= need) return false;
  expire(
    lock,
    s,
    `master ${e.name}'s ${describeJump(e)}, so it may have dropped the key early; ` +
      `${counted} of the masters that granted the lock still count, ${need} needed`,
  );
  return true;
}

/** "clock jumped +30 s" / "clock is 30 s ahead of the other masters'". */
export function describeJump(e: Pick<MasterDistrust, 'jump' | 'cause'>): string {
  const size = formatMs(Math.abs(e.jump));
  if (e.cause === 'jumped') return `clock jumped ${e.jump > 0 ? '+' : '-'}${size}`;
  return `clock is ${size} ${e.jump > 0 ? 'ahead of' : 'behind'} the other masters'`;
}
