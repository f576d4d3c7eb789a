/**
 * Self-healing extension (the `repairOnExtend` setting).
 *
 * Without it, an extension only refreshes keys that are still there (compare-and-pexpire), so a
 * long-held lock decays: every master that restarts empty loses the key for good, and once the lock
 * lives on a bare majority the next single failure ends it. With it, the extension script
 * (EXTEND_REPAIR_SCRIPT in redis/kinds/mutex.ts) also puts the key back with `SET NX PX`, same token, on
 * a master where it is missing.
 *
 * ## Rules
 * 1. `NX`: a key that holds another token is never touched (the script changes nothing on that
 *    master and it votes `held`).
 * 2. An extension succeeds only with a quorum of masters that KEPT the key: the compare-and-pexpire
 *    found our token there. A master where the key was put back votes `repaired` and does not
 *    count — neither in the extension that repaired it nor in any later one until an extension
 *    has succeeded after the repair was known to be done (the {@link RepairLedger} below).
 * 3. A master in restart quarantine may receive the key but votes `quarantined` and does not
 *    count until its quarantine ends (the script reads its boot marker like the acquire script).
 * 4. The fencing counters are not touched: the token stays, so does its fencing token.
 * 5. The validity rules of a plain extension are unchanged (sent within the remaining validity,
 *    quorum answered before it ended, new validity from the time the round started).
 *
 * ## Why `SET NX` on a master that lost the key cannot create a second holder
 * References: docs/REDLOCK.md, "Safety argument, in short", "Crash recovery" and "Extension".
 *
 * (a) A repair never takes anything from anyone. `SET NX` writes only where no key exists, so
 *     it cannot displace a contender B that holds the key on that master, and it cannot add a
 *     vote to B. Whatever B could win without the repair, it can still win or lose exactly as
 *     before; the repair can only make B's `SET NX` fail on one more master.
 *
 * (b) A repair never counts for us where it could hide a gap. The danger named in docs/REDLOCK.md
 *     ("Re-creating a missing key is not an extension: the lock may have been taken and released
 *     by someone else meanwhile") is *our* holder believing it held the lock without a break
 *     while B held a quorum in between. Rule 2 rules that out: when extension k succeeds, every
 *     master it counts held our token without interruption from the previous confirmation
 *     (the acquire, or the last successful extension) until the script ran — our token on a
 *     master can only come from our own `SET`s, and every repair we sent there is known to have
 *     run before that confirmation (the ledger). "Not in the extension that repaired it" alone
 *     would not be enough: a round is decided as soon as a quorum answered, so a repair may
 *     answer after it, and a failed extension (retried by `using()` after `NoQuorumError`) may
 *     repair a majority that the retry would then find "kept". The ledger covers both: a master
 *     with a repair (or an error: it may have run) that settled after the last confirmation, or
 *     one still in flight, does not count. A quorum held our token throughout, so B could
 *     not win a quorum in that interval (two majorities intersect, and on the common master our
 *     key blocks B's `SET NX`); and each extension starts within the previous validity, so the
 *     holder's intervals leave no gap. This is exactly the guarantee of an extension without
 *     repair, where "kept" means "held since the acquire". (The acquire's own `SET`s, some of
 *     which land after it was granted count from the first extension on, as
 *     they did before: they are covered by the acquire's quorum, not by this argument.)
 *
 *     Conversely, if B won a quorum meanwhile — possible only once our key was gone from enough
 *     masters, e.g. several restarted without quarantine or lost keys to eviction — then B's
 *     quorum intersects every quorum of ours on a master where our key was missing at some
 *     point: there it is either still B's (our `SET NX` fails: `held`) or B released it and our
 *     repair put it back (`repaired`, not counted). Either way that master does not count, so
 *     no extension of ours can succeed on a quorum that hides B's tenure: we learn the loss
 *     (LockLostError, the signal aborts) instead of papering over it.
 *
 * (c) A restarted master is quarantined for longer than any ttl (docs/REDLOCK.md, "Crash recovery"),
 *     by every engine, for acquires and — rule 3 — for extensions. It may hold our key (put back
 *     by a repair, or restored from an old snapshot), but it adds nobody's vote until every lock
 *     it may have lost has expired. So the repair cannot revive our lock on a master whose
 *     history is unknown, and B cannot use it against our lock either.
 *
 * What a repair does give: the key is back on the master, so later extensions — once it has
 * kept the key and is out of quarantine — count it again, and a lock held for hours survives
 * one master restart after another, as long as a quorum is up at each extension.
 *
 * Liveness: a repair sent while the lock is still wanted may land late (after the round decided):
 * it is never sent once the lock is released or lost, and a release sent after it on the same
 * connection deletes it. When an extension finds the lock lost, the keys that round put back
 * (the master's reply says the key was missing and was set) are deleted again at once
 * (compare-and-delete of our token), so a lost lock does not block the resource on masters where
 * it had already vanished. Nothing else is deleted early: where our key may have been kept (an
 * `ok`, a late or failed answer, a repair of an earlier round), removing it could let a contender
 * in while the holder, just told, is still inside the validity it was given. Such keys, and a
 * repair that lands even later, expire within their ttl or go with the holder's release.
 */
import type { NodeOutcome } from '../base/errors';

/** What the repair-extension script did on one master (all of its slot groups). */
export type RepairStatus = 'kept' | 'repaired' | 'held';

/**
 * Per lock and master: which masters may hold our key through a repair that is not yet covered by
 * a successful extension (rule 2). A master is *suspect* while a repair-capable script sent to it
 * has not settled (it may still run), or when one settled as a repair (or with an error: it may
 * have run) after the lock was last confirmed. {@link confirm} is called when an extension
 * succeeds: everything settled before it happened before the confirmation.
 */
export class RepairLedger {
  private readonly unsettled: number[];
  private readonly touched: boolean[];

  constructor(masters: number) {
    this.unsettled = new Array<number>(masters).fill(0);
    this.touched = new Array<boolean>(masters).fill(false);
  }

  /**
   * Follows one script sent to master `i`. The returned promise settles like `sent`, after the
   * ledger noted the result, so that the vote on it already sees the ledger up to date.
   */
  track<T>(i: number, sent: Promise<T>, status: (value: T) => RepairStatus): Promise<T> {
    this.unsettled[i]++;
    return sent.then(
      (value) => {
        this.unsettled[i]--;
        // Anything but a clean answer may mean "put back" (a reply we cannot read: be careful).
        let s: RepairStatus = 'repaired';
        try {
          s = status(value);
        } catch {
          s = 'repaired';
        }
        if (s === 'repaired') this.touched[i] = true;
        return value;
      },
      (err: unknown) => {
        this.unsettled[i]--;
        this.touched[i] = true; // it may have run before the error reached us
        throw err;
      },
    );
  }

  /** Whether master `i`'s key, found there now, may count: no repair since the last confirmation. */
  counts(i: number): boolean {
    return this.unsettled[i] === 0 && !this.touched[i];
  }

  /** An extension succeeded: repairs settled so far ran before it and no longer disqualify. */
  confirm(): void {
    this.touched.fill(false);
  }
}

const ledgers = new WeakMap<object, RepairLedger>();

/** The ledger of a lock's grant (created on its first repairing extension). */
export function ledgerOf(lock: object, masters: number): RepairLedger {
  let ledger = ledgers.get(lock);
  if (!ledger) {
    ledger = new RepairLedger(masters);
    ledgers.set(lock, ledger);
  }
  return ledger;
}

/**
 * The vote of one master in a repairing extension: `held` (another token), `repaired` (put back
 * now, or since the last confirmation: does not count yet), `quarantined` (restart quarantine),
 * else `ok` — it kept the key and counts.
 */
export function repairVote(
  status: RepairStatus,
  counts: boolean,
  quarantined: boolean,
): NodeOutcome {
  if (status === 'held') return 'held';
  if (status === 'repaired' || !counts) return 'repaired';
  return quarantined ? 'quarantined' : 'ok';
}
