/**
 * The plain lock (the mutex) with the hand-over across processes (`fairness:
 * 'across-processes'`, README.md here): the same keys, quorum, extension and replies as
 * redis/kinds/mutex.ts, plus poll marks, the order of waiting engines, parks, local take-overs
 * (FAIR_ACQUIRE_SCRIPT) and releases announced as yields or passes (FAIR_RELEASE_SCRIPT).
 */
import type {
  AcquireAnswer,
  AcquireInput,
  Announce,
  GroupReply,
  LockKind,
  ScriptCall,
} from '../redis/kinds/kind';
import { announceFlag } from '../redis/kinds/kind';
import { MUTEX, acquireLayout } from '../redis/kinds/mutex';
import { withFields } from '../base/fields';
import { FAIR_ACQUIRE_SCRIPT } from './acquire-script';
import { FAIR_RELEASE_SCRIPT } from './release-script';

/** What a fair acquire sends to one master, beyond the plain lock's. */
export interface FairAcquireInput extends AcquireInput {
  /**
   * Poll-mark keys of the resources (fair/fair-keys.ts `pollKey`; plain locks, with the `waitKeys`):
   * raised for `waitTtl` ms by a plain lock refused by another plain lock, read by a hand-over.
   */
  readonly pollKeys?: readonly string[] | undefined;
  /**
   * A local hand-over (fair/handover.ts; mutex only): the token of this process's releasing
   * holder — keys holding it count as free and are overwritten. Other kinds never get one.
   */
  readonly handoverFrom?: string | undefined;
  /**
   * Defer to pollers (fair/streak.ts; mutex only, with the `pollKeys`): a free key on which
   * another engine's poll mark is up refuses the attempt instead of being taken, and the mark
   * gets this engine's id appended (fair/acquire-script.ts FAIR_ACQUIRE_SCRIPT, `defer`).
   */
  readonly defer?: boolean | undefined;
  /**
   * Ordered yields (fair/streak.ts; mutex only, one resource, with the `pollKeys`): the order
   * key (fair/fair-keys.ts `orderKey`) and when this engine began to wait for the resource (wall
   * ms): a refusal by another engine's lock enters the engine there, a grant removes it, and a
   * free key reserved for another engine by a yield refuses (fair/acquire-script.ts FAIR_ACQUIRE_SCRIPT).
   */
  readonly orderKeys?: readonly string[] | undefined;
  readonly waitSince?: number | undefined;
  /**
   * Hand-over across processes (with the `orderKeys`): the park key (fair/fair-keys.ts `parkKey`)
   * and this engine's next token for the resource, parked there by a refusal for `life` ms;
   * `alive`, the prefix of the engines' alive channels (fair/fair-keys.ts `aliveChannel`; '' on a
   * Cluster): a free key goes to the order's head when it parked there and is alive
   * (fair/acquire-script.ts FAIR_ACQUIRE_SCRIPT).
   */
  readonly park?: {
    readonly key: string;
    readonly token: string;
    readonly life: number;
    readonly alive: string;
  };
}

/** One master's answer to a fair acquire, beyond the plain lock's. */
export interface FairAcquireAnswer extends AcquireAnswer {
  /**
   * Granted by a local hand-over (mutex only): the most subscriber connections any of the
   * resources' release channels has on this master — this engine's own watch included
   * (fair/fair-queue.ts: whether another engine waits).
   */
  readonly watchers?: number;
  /**
   * Granted by a local hand-over: the longest remaining poll mark of the resources on this master
   * (ms; 0 or absent when none): a plain lock of another engine polls for them (fair-keys.ts).
   */
  readonly polled?: number;
  /**
   * Granted while other engines wait for the resource in the masters' order (mutex, one
   * resource: FAIR_ACQUIRE_SCRIPT's `{2, age, …}`): the lock's release is a pass
   * (fair/fair-queue.ts `announceAs`), not a plain release that its own process could win.
   */
  readonly othersWait?: boolean;
}

/**
 * How a release is announced in the fair mode: as the plain lock's, as a yield (a plain lock's
 * holder lets other processes go first: fair-queue.ts), or as a pass (a plain lock released
 * while other engines wait for it goes to the one that waited longest, like a yield's, without
 * the releasing engine joining the order: fair-queue.ts `announceAs`).
 */
export type FairAnnounce = Announce | 'yield' | 'pass';

/**
 * Ordered yields (fair/streak.ts): the order keys of a yield's lock keys (fair-keys.ts
 * `orderKey`, one per lock key), how long (ms) the yield reserves them for the engine that has
 * waited longest, and since when (wall ms) the yielding engine's own waiters wait: it joins the
 * order with that score. Kinds without an order ignore it.
 */
export interface YieldOrder {
  readonly keys: readonly string[];
  readonly reserveMs: number;
  /** A yield: since when the yielding engine's local waiters wait (wall ms). A pass: none. */
  readonly since: number | undefined;
  /** How long (ms) the order lives at least after the yield (it may have been made by it). */
  readonly keepMs: number;
  /**
   * Hand-over across processes: the park key, the yielding engine's own next token (parked
   * with `ttl` for `life` ms; '' none), and what an install needs: the fencing counter key
   * (when fencing), its ttl, and the boot marker key (when checked).
   */
  readonly install?: {
    readonly parkKey: string;
    readonly token: string;
    readonly ttl: number;
    readonly life: number;
    readonly fenceKey: string | undefined;
    readonly fenceTtl: number;
    readonly marker: string | undefined;
    /** The alive channels' prefix (fair/fair-keys.ts `aliveChannel`); '' not checked. */
    readonly alive: string;
    /**
     * The token whose yield or pass installed the releasing lock (FairGrant.installedBy; '' none):
     * a master whose key still holds it has not run that release yet (redis/scripts/release.ts).
     */
    readonly after: string;
  };
}

/** The publish flag of FAIR_RELEASE_SCRIPT for `announce` (a yield '3', a pass '4'). */
function fairAnnounceFlag(announce: FairAnnounce): string {
  if (announce === 'yield') return '3';
  if (announce === 'pass') return '4';
  return announceFlag(announce);
}

/**
 * The mutex of the fair mode. Its quorum and its proof are the mutex's (redis/kinds/mutex.ts): the
 * fair parts only refuse, reserve, or install a token on a master where the key is free, one
 * `SET` as the plain acquire's, counted by the same quorum round.
 */
export const FAIR_MUTEX: LockKind & {
  /** A release announced as a yield or a pass, with the order of ordered yields when given. */
  releaseAs(
    token: string,
    keys: readonly string[],
    announce: FairAnnounce,
    order: YieldOrder | undefined,
  ): ScriptCall;
} = Object.assign({}, MUTEX, {
  acquire(input: AcquireInput): ScriptCall {
    const fair = input as FairAcquireInput;
    const waitKeys = fair.waitTtl ? fair.waitKeys : undefined;
    // The hand-over across processes' parts (poll marks, a local take-over): the fair script.
    if (fair.handoverFrom !== undefined || (waitKeys && fair.pollKeys)) {
      return fairAcquire(fair, waitKeys);
    }
    return MUTEX.acquire(input);
  },

  readAcquire(groups: readonly GroupReply[], resources: readonly string[]): AcquireAnswer {
    // `{2, age, …}`: granted while other engines wait in the order (FAIR_ACQUIRE_SCRIPT).
    let othersWait = false;
    const plain = groups.map((g): GroupReply => {
      const v = g.value;
      if (!Array.isArray(v) || v[0] !== 2) return g;
      othersWait = true;
      return { resources: g.resources, value: [1, ...(v.slice(1) as unknown[])] };
    });
    const answer = MUTEX.readAcquire(plain, resources);
    return othersWait && answer.granted ? withFields(answer, { othersWait }) : answer;
  },

  releaseAs(
    token: string,
    keys: readonly string[],
    announce: FairAnnounce,
    order: YieldOrder | undefined,
  ): ScriptCall {
    if ((announce === 'yield' || announce === 'pass') && order?.keys.length === keys.length) {
      // Ordered yields and passes: the release also reserves the keys (or installs a parked
      // token) for the engine that waited longest; a yield's engine joins the order.
      const args = [
        token,
        fairAnnounceFlag(announce),
        String(keys.length),
        String(order.reserveMs),
        order.since === undefined ? '' : String(order.since),
        String(order.keepMs),
      ];
      const inst = order.install;
      if (!inst) return { script: FAIR_RELEASE_SCRIPT, keys: [...keys, ...order.keys], args };
      const all = [...keys, ...order.keys, inst.parkKey];
      if (inst.fenceKey !== undefined) all.push(inst.fenceKey);
      if (inst.marker !== undefined) all.push(inst.marker);
      args.push(
        inst.token,
        String(inst.ttl),
        String(inst.life),
        inst.fenceKey !== undefined ? '1' : '0',
        String(inst.fenceTtl),
        inst.marker !== undefined ? '1' : '0',
        inst.alive,
        inst.after,
      );
      return { script: FAIR_RELEASE_SCRIPT, keys: all, args };
    }
    // A yield or a pass without the order (several resources): announced as such.
    if (announce === 'yield' || announce === 'pass') {
      return { script: FAIR_RELEASE_SCRIPT, keys, args: [token, fairAnnounceFlag(announce)] };
    }
    return MUTEX.release(token, keys, announce);
  },
});

/**
 * The call of FAIR_ACQUIRE_SCRIPT (`fairness: 'across-processes'`, lib/core/fair/README.md): the
 * plain keys and arguments, then the poll marks, the order and the park, and the take-over,
 * deferral and wait start arguments.
 */
function fairAcquire(input: FairAcquireInput, waitKeys: readonly string[] | undefined): ScriptCall {
  const ordered =
    waitKeys !== undefined &&
    input.pollKeys !== undefined &&
    input.orderKeys !== undefined &&
    input.waitSince !== undefined;
  const more = [...(input.pollKeys ?? [])];
  if (ordered && input.orderKeys) more.push(...input.orderKeys);
  if (ordered && input.park) more.push(input.park.key);
  const { keys, args } = acquireLayout(input, waitKeys, more);
  const defer = input.defer === true && waitKeys !== undefined && input.pollKeys !== undefined;
  if (waitKeys || input.handoverFrom) args.push(waitKeys ? String(input.waitTtl) : '0');
  if (input.handoverFrom || defer || ordered) args.push(input.handoverFrom ?? '');
  if (defer || ordered) args.push(defer ? '1' : '0');
  if (ordered) args.push(String(input.waitSince));
  if (ordered && input.park) args.push(input.park.token, String(input.park.life), input.park.alive);
  return { script: FAIR_ACQUIRE_SCRIPT, keys, args, birthArg: input.marker ? 3 : undefined };
}
