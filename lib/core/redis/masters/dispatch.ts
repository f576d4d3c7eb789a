import { monotonicNow } from '../../base/clock';
import type { VoteSink } from '../../quorum/round';
import type { GroupReply, ScriptCall } from '../scripts/call';
import type { ClockWatch } from './clock-watch';
import type { MasterNode } from './node';
import { slotGroups } from './slots';

/**
 * Per-master sending, in one place: the readiness gate of the restart quarantine
 * ({@link afterCheck}), Cluster slot groups ({@link grouped}) and the script call itself (EVALSHA
 * with the one EVAL fallback of redis/scripts/lua.ts, through {@link MasterNode.evalScriptInto}
 * and {@link MasterNode.evalScript}).
 */
export class Dispatch {
  constructor(
    private readonly keyOf: (resource: string) => string,
    /**
     * What an acquire on a master waits for besides the restart quarantine's check: the
     * assumption checks (redis/masters/master-checks.ts `gate`); `undefined` when nothing.
     */
    private readonly gate?: (node: MasterNode) => Promise<void> | undefined,
  ) {}

  /**
   * Runs the script call `build(keys, resources, node)` once per group of keys that may share a
   * script on this master: one group on a standalone master, one per hash slot on a Cluster.
   * Resolves with the group replies. `wanted` guards the EVAL fallback (see redis/scripts/lua.ts).
   */
  grouped(
    node: MasterNode,
    resources: readonly string[],
    keys: readonly string[],
    build: (keys: readonly string[], resources: readonly string[], node: MasterNode) => ScriptCall,
    wanted?: () => boolean,
    clocks?: ClockWatch,
  ): Promise<GroupReply[]> {
    return this.read(node, resources, keys, build, (groups) => groups, wanted, clocks);
  }

  /**
   * {@link grouped}, with the group replies read by `read` in the same continuation. With
   * `clocks` (a vote: the clock check, redis/masters/clock-watch.ts) the master's clock is read
   * in the same round trip — inside the script when the call can carry it (`ScriptCall.clocked`),
   * else by a TIME sent right after it — and recorded before the vote is judged.
   */
  read<T>(
    node: MasterNode,
    resources: readonly string[],
    keys: readonly string[],
    build: (keys: readonly string[], resources: readonly string[], node: MasterNode) => ScriptCall,
    read: (groups: GroupReply[]) => T,
    wanted?: () => boolean,
    clocks?: ClockWatch,
  ): Promise<T> {
    if (!node.cluster)
      return this.standalone(node, build(keys, resources, node), resources, read, wanted, clocks);
    return Promise.all(
      slotGroups(resources, this.keyOf).map((group) => {
        const call = build(
          group.map((r) => this.keyOf(r)),
          group,
          node,
        );
        return sendFollowed(node, call, wanted).then((value): GroupReply => ({
          resources: group,
          value,
        }));
      }),
    ).then(read);
  }

  /**
   * {@link read} into a voting round's `sink` (as the `i`-th master) instead of a promise: on a
   * standalone master whose call carries the clock (or needs none), the reply is read and
   * delivered in the EVALSHA's own continuation ({@link vote}) — one promise and two callbacks
   * less per master and round than the round waiting on {@link read}'s promise. A Cluster's slot
   * groups and a call that needs a TIME after it are delivered when {@link read}'s promise
   * settles. Returns `undefined` (a round's `send` that delivers itself).
   */
  readInto<T>(
    node: MasterNode,
    resources: readonly string[],
    keys: readonly string[],
    build: (keys: readonly string[], resources: readonly string[], node: MasterNode) => ScriptCall,
    read: (groups: GroupReply[]) => T,
    sink: VoteSink<T>,
    i: number,
    wanted?: () => boolean,
    clocks?: ClockWatch,
  ): undefined {
    if (node.cluster) {
      deliver(this.read(node, resources, keys, build, read, wanted, clocks), sink, i);
      return undefined;
    }
    const call = build(keys, resources, node);
    if (clocks && !call.clocked) {
      deliver(this.standalone(node, call, resources, read, wanted, clocks), sink, i);
    } else this.vote(node, call, resources, read, sink, i, wanted, clocks);
    return undefined;
  }

  /**
   * `call` on a standalone master, its reply read by `read`, as a promise ({@link vote}'s). With
   * `clocks`, a call that cannot carry the clock gets a TIME right after it, so that a jump
   * between the two shows in the reading (one before it would vouch for a vote cast after a jump).
   */
  private standalone<T>(
    node: MasterNode,
    call: ScriptCall,
    resources: readonly string[],
    read: (groups: GroupReply[]) => T,
    wanted: (() => boolean) | undefined,
    clocks: ClockWatch | undefined,
  ): Promise<T> {
    const voted = new Promise<T>((resolve, reject) =>
      this.vote(node, call, resources, read, settling(resolve, reject), 0, wanted, clocks),
    );
    const sampled = clocks && !call.clocked ? clocks.sample(node) : undefined;
    return sampled ? Promise.all([sampled, voted]).then((both) => both[1]) : voted;
  }

  /**
   * Sends `call` to a standalone master and delivers its reply, read by `read`, into `sink` as
   * the `i`-th answer, in the EVALSHA's own continuation (one continuation; a follow-up, when the
   * reply asks for one, adds its own). A clocked reply's reading goes to `clocks` first.
   */
  private vote<T>(
    node: MasterNode,
    call: ScriptCall,
    resources: readonly string[],
    read: (groups: GroupReply[]) => T,
    sink: VoteSink<T>,
    i: number,
    wanted: (() => boolean) | undefined,
    clocks: ClockWatch | undefined,
  ): void {
    const sent = clocks ? monotonicNow() : 0;
    node.evalScriptInto(
      call.script,
      call.keys,
      call.args,
      wanted,
      (raw) => {
        try {
          const value = call.clocked ? unclocked(raw, call, node, sent, clocks) : raw;
          const next = nextCall(call, value, wanted);
          if (!next) return sink.answered(i, read([{ resources, value }]));
          const followed = sendFollowed(node, next, wanted);
          deliver(
            followed.then((v) => read([{ resources, value: v }])),
            sink,
            i,
          );
        } catch (err) {
          sink.failed(i, err);
        }
      },
      (err) => sink.failed(i, err),
    );
  }

  /**
   * {@link afterCheck}, when there is something to wait for first (the promise of `task`, sent
   * once the checks are done); `undefined` when the master can be sent to now — by the caller,
   * which may then deliver into a voting round itself ({@link readInto}).
   */
  afterCheckOrNow<T>(
    node: MasterNode,
    wanted: () => boolean,
    task: (node: MasterNode) => Promise<T>,
  ): Promise<T> | undefined {
    const checked = this.gate?.(node);
    if (checked) {
      return checked.then(() =>
        wanted()
          ? (this.afterQuarantineCheck(node, wanted, task) ?? task(node))
          : Promise.reject(new Error('not sent')),
      );
    }
    return this.afterQuarantineCheck(node, wanted, task);
  }

  /**
   * Sends `task` once the master was checked after its last reconnect (writes that may take a
   * key: acquire, repairing extension), also when the round was decided meanwhile: every master
   * that can take the key must get it (a lock left on a bare majority is lost at the next single
   * failure; a master in quarantine gets it too, its vote just does not count). It is dropped
   * only when `wanted()` says the caller moved on (the attempt failed or its lock ended): its
   * clean-up or release may already be on the wire, and a SET sent after it would be an orphan
   * key. Sent while still wanted, it goes out on the connection before any such clean-up, which
   * then removes it. Rejects at once when the master cannot be reached (see
   * {@link MasterNode.ready}), and with the cause when its votes must not count (a replica, a
   * duplicate, ...: redis/masters/master-checks.ts).
   */
  afterCheck<T>(
    node: MasterNode,
    wanted: () => boolean,
    task: (node: MasterNode) => Promise<T>,
  ): Promise<T> {
    return this.afterCheckOrNow(node, wanted, task) ?? task(node);
  }

  /** `task` once the restart quarantine's check is done; `undefined` when it is done already. */
  private afterQuarantineCheck<T>(
    node: MasterNode,
    wanted: () => boolean,
    task: (node: MasterNode) => Promise<T>,
  ): Promise<T> | undefined {
    const pending = node.ready();
    if (!pending) return undefined;
    return pending.then(() => (wanted() ? task(node) : Promise.reject(new Error('not sent'))));
  }
}

/** A sink for one answer that settles a promise with it. */
function settling<T>(resolve: (value: T) => void, reject: (err: unknown) => void): VoteSink<T> {
  return { answered: (_i, value) => resolve(value), failed: (_i, err) => reject(err) };
}

/** Delivers `value`'s outcome into `sink` as the `i`-th master's answer. */
function deliver<T>(value: Promise<T>, sink: VoteSink<T>, i: number): void {
  value.then(
    (v) => sink.answered(i, v),
    (err: unknown) => sink.failed(i, err),
  );
}

/**
 * The call that `call`'s reply `value` asks to send next on the same master — only while
 * `wanted` (a write sent after the caller moved on, its clean-up or release already on the wire,
 * would leave an orphan key).
 */
function nextCall(
  call: ScriptCall,
  value: unknown,
  wanted: (() => boolean) | undefined,
): ScriptCall | undefined {
  const next = call.followUp?.(value, call);
  return next && (!wanted || wanted()) ? next : undefined;
}

/**
 * Sends `call` on `node`, then each call its reply asks for ({@link nextCall}); the last reply
 * (a clocked one unwrapped: a Cluster's slot groups reach several nodes, whose clocks are not
 * recorded).
 */
function sendFollowed(
  node: MasterNode,
  call: ScriptCall,
  wanted: (() => boolean) | undefined,
): Promise<unknown> {
  return node.evalScript(call.script, call.keys, call.args, wanted, (raw) => {
    const value = call.clocked ? unclocked(raw, call, node, 0, undefined) : raw;
    const next = nextCall(call, value, wanted);
    return next ? sendFollowed(node, next, wanted) : value;
  });
}

/**
 * The reply inside a clocked one (`{time, reply}`, the time in µs since the epoch:
 * redis/scripts/lua.ts `clockedReturn`); the master's clock goes to `clocks`, bracketed by `sent`
 * and now. Throws on another shape (the vote is then an error, never a grant).
 */
function unclocked(
  raw: unknown,
  call: ScriptCall,
  node: MasterNode,
  sent: number,
  clocks: ClockWatch | undefined,
): unknown {
  if (!Array.isArray(raw) || raw.length !== 2) {
    throw new Error(`Malformed reply of the ${call.script.name} script: no clock reading`);
  }
  if (clocks) {
    const server = Number(raw[0]) / 1000;
    if (Number.isFinite(server)) {
      clocks.record(node.index, { server, sent, received: monotonicNow() });
    }
  }
  return raw[1];
}
