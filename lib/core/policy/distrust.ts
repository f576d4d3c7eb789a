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
import type { MasterDistrust } from '../store';
import type { EngineContext } from './context';

/** Re-checks the held locks after `e`, then tells the observers. */
export function distrusted(ctx: EngineContext, e: MasterDistrust): void {
  const { held, store, observers } = ctx;
  const out = new Set(e.distrusted);
  let lost = 0;
  for (const lock of held.list()) {
    const s = lockState(lock);
    if (s.released || s.lostReason) continue;
    if (!s.votes.some((v) => v.node === e.node && v.outcome === 'ok')) continue;
    let counted = 0;
    for (const v of s.votes) if (v.outcome === 'ok' && !out.has(v.node)) counted++;
    const need = store.quorumFor?.(s.grant?.kind) ?? store.quorum;
    if (counted >= need) continue;
    lost++;
    expire(
      lock,
      s,
      `master ${e.name}'s ${describeJump(e)}, so it may have dropped the key early; ` +
        `${counted} of the masters that granted the lock still count, ${need} needed`,
    );
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

/** "clock jumped +30 s" / "clock is 30 s ahead of the other masters'". */
export function describeJump(e: Pick<MasterDistrust, 'jump' | 'cause'>): string {
  const size = formatMs(Math.abs(e.jump));
  if (e.cause === 'jumped') return `clock jumped ${e.jump > 0 ? '+' : '-'}${size}`;
  return `clock is ${size} ${e.jump > 0 ? 'ahead of' : 'behind'} the other masters'`;
}
