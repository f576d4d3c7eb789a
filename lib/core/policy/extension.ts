import { monotonicNow } from '../base/clock';
import { withFields } from '../base/fields';
import { ExtensionLimitError, LockLostError, NoQuorumError } from '../base/errors';
import type { LockErrorDetail, NodeVote } from '../base/errors';
import { applyExtension, expire } from '../lock/lock';
import type { Lock, LockState } from '../lock/lock';
import type { EngineContext } from './context';
import type { Grant } from '../store';

/**
 * Extends `lock` to `ttl` ms (docs/REDLOCK.md, "Extension"): refused once released, past
 * `maxExtensions`, or after its validity ended; otherwise one round on the store. The lock is
 * extended, lost (its signal aborts first, then what the round itself put back is undone), or
 * keeps its old validity when too few masters answered in time ({@link NoQuorumError}).
 */
export async function extendLock(
  ctx: EngineContext,
  lock: Lock,
  s: LockState,
  ttl: number,
): Promise<Lock> {
  const { settings, observers } = ctx;
  const detail = (votes: readonly NodeVote[], elapsed = 0): LockErrorDetail => ({
    resources: lock.resources,
    votes,
    attempts: 1,
    elapsed,
  });
  if (s.released) throw new LockLostError(detail(s.votes), 'it was released');
  if (s.extensions >= settings.maxExtensions) {
    throw new ExtensionLimitError(
      withFields(detail(s.votes), { maxExtensions: settings.maxExtensions }),
    );
  }
  if (s.validUntil - monotonicNow() <= 0) {
    expire(lock, s, 'validity ended before the extension');
    throw new LockLostError(detail(s.votes), 'its validity ended before the extension');
  }
  // Every lock is created from a grant; the field is optional only for the type.
  const out = await ctx.store.extend(s.grant as Grant, ttl, s.validUntil);
  if (out.verdict === 'extended') {
    applyExtension(lock, s, withFields(out, { ttl }), settings.driftFactor);
    if (observers.active) {
      observers.emit({
        type: 'extended',
        resources: lock.resources,
        lock,
        ttl,
        extensions: s.extensions,
        duration: out.end - out.start,
      });
    }
    return lock;
  }
  if (out.verdict === 'lost' || out.verdict === 'expired') {
    const lost = out.verdict === 'lost';
    // The holder is told first, then what the round itself put back is undone.
    expire(
      lock,
      s,
      lost ? 'a majority of masters no longer hold it' : 'validity ended during the extension',
    );
    await out.afterLoss?.();
    throw new LockLostError(
      detail(out.votes, out.elapsed),
      lost ? 'a majority of masters no longer hold it' : 'its validity ended during the extension',
    );
  }
  throw new NoQuorumError(
    withFields(detail(out.votes, out.elapsed), { reason: out.verdict, quorum: ctx.store.quorum }),
  );
}
