import { monotonicNow } from '../base/clock';
import type { ExtendAnswer } from './kinds/kind';
import type { ExtendOutcome, Grant } from '../store';
import { extendVerdict, validityAfter } from '../quorum/protocol';
import type { Tally } from '../quorum/round';
import type { RedisContext } from './context';
import { okVotes } from './attempt';
import { ledgerOf, repairVote } from './repair';
import type { RepairLedger } from './repair';

/**
 * Extension on the masters (docs/REDLOCK.md, "Extension"):
 * compare-and-pexpire of the token on every master within the lock's remaining validity — with
 * the `repairOnExtend` setting, also `SET NX` where the key went missing (redis/repair.ts explains why
 * such masters do not count toward the quorum). Never re-creates the key of a lock that ended.
 */
export async function extendOnMasters(
  store: RedisContext,
  grant: Grant,
  ttl: number,
  deadline: number,
): Promise<ExtendOutcome> {
  const { settings } = store;
  const start = monotonicNow();
  const wallStart = Date.now();
  const timeout = Math.min(settings.requestTimeout, deadline - start);
  // Only a mutex key can be put back; a holder set (shared, semaphore) is never re-created.
  const kind = store.kindOf(grant.kind);
  const ledger =
    settings.repairOnExtend && kind.repairs ? ledgerOf(grant, store.nodes.length) : undefined;
  const tally = ledger
    ? await repairingRound(store, grant, ledger, ttl, timeout)
    : await plainRound(store, grant, ttl, timeout);
  const end = monotonicNow();
  // Masters whose clock is not trusted (redis/masters/clock-watch.ts) do not count.
  const ok = store.clocks.review(tally.votes) > 0 ? okVotes(tally.votes) : tally.ok;
  const verdict = extendVerdict({
    ok,
    // Masters that cannot count before this lock's next successful extension: another holder's
    // key, or ours put back since the last one (redis/repair.ts, rule 2).
    blocked: tally.votes.filter((v) => v.outcome === 'held' || v.outcome === 'repaired').length,
    masters: store.nodes.length,
    quorum: store.quorumFor(grant.kind),
    end,
    deadline,
    validity: validityAfter(ttl, start, end, settings.driftFactor),
  });
  if (verdict === 'extended') {
    ledger?.confirm();
    return { verdict, start, wallStart, end, votes: tally.votes };
  }
  const lost = verdict === 'lost' || verdict === 'expired';
  return {
    verdict,
    votes: tally.votes,
    elapsed: end - start,
    afterLoss: ledger && lost ? () => undoRepairs(store, grant, tally) : undefined,
  };
}

function plainRound(
  store: RedisContext,
  grant: Grant,
  ttl: number,
  timeout: number,
): Promise<Tally<ExtendAnswer>> {
  const keys = grant.resources.map((r) => store.keyOf(r));
  const kind = store.kindOf(grant.kind);
  const clock = store.clocks.enabled; // the master's clock comes with its vote (clock-watch.ts)
  const whole = kind.extend(grant.token, ttl, keys, undefined, clock); // every standalone master's
  return store.round<ExtendAnswer>({
    quorum: store.quorumFor(grant.kind),
    timeout,
    send: (node) =>
      store.dispatch.read(
        node,
        grant.resources,
        keys,
        (groupKeys, group) =>
          group === grant.resources
            ? whole
            : kind.extend(grant.token, ttl, groupKeys, undefined, clock),
        (groups) => kind.readExtend(groups, false),
        undefined,
        store.clocks,
      ),
    judge: (a, node) => {
      if (a.status !== 'kept') return 'held';
      return store.clocks.counts(node.index) ? 'ok' : 'quarantined';
    },
  });
}

/**
 * One round of a repairing extension (redis/repair.ts): compare-and-pexpire where the key is ours,
 * `SET NX` where it is missing, on every master — sent after the master's post-connect check
 * like an acquire, never once the lock ended. Only masters that kept the key, had no repair since
 * the lock was last confirmed, and are out of restart quarantine vote `ok`.
 */
async function repairingRound(
  store: RedisContext,
  grant: Grant,
  ledger: RepairLedger,
  ttl: number,
  timeout: number,
): Promise<Tally<ExtendAnswer>> {
  const keys = grant.resources.map((r) => store.keyOf(r));
  const duration = store.settings.quarantine.duration;
  const wanted = (): boolean => !grant.ended;
  const kind = store.kindOf(grant.kind); // the mutex: only its keys are repaired
  const tally = await store.round<ExtendAnswer>({
    timeout,
    send: (node) =>
      ledger.track(
        node.index,
        store.dispatch
          .afterCheck(node, wanted, () =>
            store.dispatch.grouped(
              node,
              grant.resources,
              keys,
              (groupKeys) =>
                kind.extend(
                  grant.token,
                  ttl,
                  groupKeys,
                  {
                    marker: node.checksMarker ? store.markerKey : undefined,
                    markerBirth: node.checksMarker ? node.knownBirth : undefined,
                  },
                  store.clocks.enabled,
                ),
              wanted,
              store.clocks,
            ),
          )
          .then((groups) => kind.readExtend(groups, true)),
        (a) => a.status,
      ),
    judge: (a, node) => {
      if (node.checksMarker && a.markerAge !== undefined) store.noteMarkerAge(node);
      const young = node.checksMarker && a.markerAge !== undefined && a.markerAge < duration;
      const vote = repairVote(a.status, ledger.counts(node.index), young);
      // A master whose clock jumped does not count (redis/masters/clock-watch.ts).
      return vote === 'ok' && !store.clocks.counts(node.index) ? 'quarantined' : vote;
    },
  });
  store.noteQuarantined(tally);
  return tally;
}

/**
 * A repairing extension found the lock lost: deletes (compare-and-delete of its token) the keys
 * this round put back — only on masters whose reply says the key was missing and was set now —
 * so that a lost lock does not block the resource where it had already disappeared. Deleting
 * there only restores what the masters held before the round. Every other master is left as a
 * plain extension leaves it: where our key may have been kept (the master answered `ok`, or
 * late, or with an error, or was put back by an earlier round), deleting it could open the
 * resource to a contender while the holder, told a moment ago, is still winding down inside the
 * validity it was given; such keys expire within their ttl or go with the holder's release.
 */
async function undoRepairs(
  store: RedisContext,
  grant: Grant,
  tally: Tally<ExtendAnswer>,
): Promise<void> {
  const repairedNow = store.nodes.filter((_, i) => {
    const reply = tally.replies[i];
    return reply?.kind === 'reply' && reply.value.status === 'repaired';
  });
  if (repairedNow.length === 0) return;
  await store.releaseKeys(grant.resources, grant.token, {
    only: repairedNow,
    waitAll: true,
    announce: 'release',
  });
}
