import { formatMs, monotonicNow } from '../../base/clock';
import { withFields } from '../../base/fields';
import type { NodeVote } from '../../base/errors';
import type { RedlockLogger } from '../../base/settings';
import { clockJump, againstPeers } from '../../quorum/clocks';
import type { ClockSample } from '../../quorum/clocks';
import type { MasterNode } from './node';

/**
 * The masters' clocks, watched while the engine runs (the rules: quorum/clocks.ts; the promise:
 * docs/guarantees.md, "Clock jumps"). Every acquire and extension reads each standalone master's
 * clock (`TIME`) in the same round trip as its vote — inside the script when the kind's script
 * can carry it (the mutex's: redis/scripts/lua.ts `clockLua`, read in the same atomic run as the
 * vote), else as a command of its own sent on the same connection right after the script
 * (redis/masters/dispatch.ts); the reading is judged before the vote counts:
 *
 * - against the master's previous reading: a clock that moved against the engine's monotonic
 *   clock by more than the drift allowance has **jumped** — its keys may have expired early
 *   (forward) or live too long (back);
 * - against the other masters' latest readings, for every reading (directly, or through the
 *   previous reading it moved with, when that one was found in line): a clock off the agreeing
 *   majority by more than `clockTolerance` **disagrees** — this also catches a clock set back and
 *   jumped forward again between two readings, which its own previous reading cannot show; a
 *   master never yet found in line with the others (its first reading, with too few others read)
 *   does not count for that attempt (nothing is started).
 *
 * Either way it is treated like a master that restarted empty: its votes do not count for the
 * quarantine period (`quarantine.duration`, about maxTtl: by then every lock it may have lost has
 * ended), counted from the detection, which is after the jump — and for longer while it stays off
 * the others. Detections are logged once per episode, reported to the listener (the engine
 * re-checks the locks it holds that counted that master and emits an event) and shown in
 * `health()`. Cluster masters are not read (TIME would reach any one of their nodes).
 */
export class ClockWatch {
  /** The latest reading per master (every reading: the rate check's baseline, the peers' median). */
  private readonly latest: (ClockSample | undefined)[];
  /** Whether the master's clock was found in line with the other masters' since its first reading. */
  private readonly known: boolean[];
  /** Masters read since the last {@link review} whose peer check is due. */
  private readonly fresh: boolean[];
  /** Whether the master's latest reading was found in line with the other masters'. */
  private readonly inLine: boolean[];
  /** Monotonic end of each master's clock quarantine (0: none). */
  private readonly until: number[];
  /** The jump (or disagreement) that started it, ms. */
  private readonly jumps: number[];
  /** Per master, the report of its current (or last) distrust episode. */
  private readonly episodes: (ClockDistrust | undefined)[];
  /** Whether the log said so since the master was last found in line with the others. */
  private readonly said: boolean[];
  /** Whether the log said its clock cannot be checked (no majority agrees) since then. */
  private readonly saidUnsettled: boolean[];
  private readonly listeners = new Set<(e: ClockDistrust) => void>();

  constructor(
    private readonly nodes: readonly MasterNode[],
    private readonly options: {
      readonly enabled: boolean;
      readonly driftFactor: number;
      readonly tolerance: number;
      readonly duration: number;
      readonly logger: RedlockLogger;
    },
  ) {
    const n = nodes.length;
    this.latest = new Array<ClockSample | undefined>(n).fill(undefined);
    this.known = new Array<boolean>(n).fill(false);
    this.fresh = new Array<boolean>(n).fill(false);
    this.inLine = new Array<boolean>(n).fill(false);
    this.until = new Array<number>(n).fill(0);
    this.jumps = new Array<number>(n).fill(0);
    this.episodes = new Array<ClockDistrust | undefined>(n).fill(undefined);
    this.said = new Array<boolean>(n).fill(false);
    this.saidUnsettled = new Array<boolean>(n).fill(false);
  }

  /** Whether the clock check runs. */
  get enabled(): boolean {
    return this.options.enabled;
  }

  /** Tells `listener` of every master found jumping; returns a function that stops it. */
  listen(listener: (e: ClockDistrust) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Sends `TIME` to `node` now (after the vote's script, on the same connection: a jump between
   * the two shows in the reading) and records the reading when it comes; `undefined` when the
   * master is not read. Never rejects: a master that refuses TIME, or fails, is judged without a
   * reading.
   */
  sample(node: MasterNode): Promise<void> | undefined {
    if (!this.options.enabled || node.cluster) return undefined;
    const sent = monotonicNow();
    let reading: Promise<number>;
    try {
      reading = node.time();
    } catch {
      return undefined; // a client that cannot send it (its vote is judged without a sample)
    }
    return reading.then(
      (server) => this.record(node.index, { server, sent, received: monotonicNow() }),
      () => undefined,
    );
  }

  /**
   * Records one reading of master `i`'s clock. The rate check runs here; the peer check is due
   * only when this reading cannot inherit its previous one's: a reading that moved with the
   * monotonic clock since one found in line with the other masters is in line by that alone
   * (the steady state: no comparison, nothing allocated on the acquire path).
   */
  record(i: number, s: ClockSample): void {
    if (!this.options.enabled) return;
    const prev = this.latest[i];
    this.latest[i] = s;
    const jump = prev ? clockJump(prev, s, this.options.driftFactor) : 0;
    if (prev && jump === 0 && this.inLine[i]) return;
    this.inLine[i] = false;
    this.fresh[i] = true;
    if (jump !== 0) this.distrust(i, jump, 'jumped');
  }

  /**
   * Whether master `i`'s votes count now: not in a clock quarantine, and its latest reading in
   * line with the other masters'. A master the engine never found in line yet (its first reading,
   * while too few others were read) counts for now; {@link review} decides before the verdict.
   */
  counts(i: number): boolean {
    if (this.fresh[i]) this.peerCheck(i, false);
    // (0 until a master is first distrusted: no clock read on every vote.)
    const until = this.until[i];
    return !(until > 0 && until > monotonicNow());
  }

  /**
   * Why master `i`'s votes do not count now (the report its listeners were given when the
   * episode began); `undefined` while they count.
   */
  distrustOf(i: number): ClockDistrust | undefined {
    return this.counts(i) ? undefined : this.episodes[i];
  }

  /** ms left of master `i`'s clock quarantine (0: none), and the jump that started it. */
  state(i: number): { readonly remaining: number; readonly jump: number } {
    const remaining = Math.max(0, this.until[i] - monotonicNow());
    return { remaining: Math.ceil(remaining), jump: remaining > 0 ? this.jumps[i] : 0 };
  }

  /**
   * Before a round's votes are counted: checks every reading it brought against the other
   * masters', and turns the `ok` votes of masters whose clock cannot be trusted (distrusted, or
   * never yet found in line with the others) into `quarantined`; every such vote gets the time
   * its quarantine has left. Changes `votes` in place; returns how many `ok` votes it turned.
   */
  review(votes: NodeVote[]): number {
    if (!this.options.enabled) return 0;
    for (let i = 0; i < this.fresh.length; i++) if (this.fresh[i]) this.peerCheck(i, true);
    const now = monotonicNow();
    let turned = 0;
    for (let k = 0; k < votes.length; k++) {
      const v = votes[k];
      if (v.outcome !== 'ok' && v.outcome !== 'quarantined') continue;
      const i = v.node;
      const distrusted = this.until[i] > now;
      // A master read but never found in line with the others (too few others read yet).
      const undecided = !this.known[i] && this.latest[i] !== undefined;
      if (!distrusted && !undecided) continue;
      if (undecided) this.unsettled(i);
      if (v.outcome === 'ok') turned++;
      const remaining = distrusted ? Math.ceil(this.until[i] - now) : 0;
      votes[k] = withFields(
        { node: v.node, name: v.name, outcome: 'quarantined' as const, latency: v.latency },
        remaining > 0 || v.quarantineRemaining !== undefined
          ? { quarantineRemaining: Math.max(remaining, v.quarantineRemaining ?? 0) }
          : {},
      );
    }
    return turned;
  }

  /**
   * Master `i` was never found in line with the others although enough of them were read: no
   * majority of the masters' clocks agrees within `clockTolerance`, so none can vouch for the
   * others. Said once per master (until it is found in line): otherwise its votes would just
   * not count, without a word.
   */
  private unsettled(i: number): void {
    let read = 0;
    for (const s of this.latest) if (s) read++;
    if (this.saidUnsettled[i] || read < Math.min(3, this.latest.length)) return;
    this.saidUnsettled[i] = true;
    this.options.logger.warn(
      `Redlock: master ${this.nodes[i].name}'s clock cannot be checked: no majority of the ` +
        `masters' clocks agrees within clockTolerance (${this.options.tolerance} ms), so its ` +
        'votes do not count until they do. Keep the masters\u2019 clocks in step (NTP), or raise ' +
        '`clockTolerance`.',
    );
  }

  /**
   * Reads every connected standalone master's clock now (the engine's start), so that the
   * first votes are judged with every master's reading at hand, not just those of the first
   * replies.
   */
  warm(): void {
    if (!this.options.enabled) return;
    for (const node of this.nodes) if (node.connection.isReady) void this.sample(node);
  }

  /**
   * Master `i`'s latest reading against the other masters' (quorum/clocks.ts `againstPeers`):
   * off the agreeing majority by more than `clockTolerance`, it is distrusted — for every
   * reading not already in line through its previous one ({@link record}), not only the first:
   * a master whose clock was set back and jumped forward again between two of this engine's
   * readings (the first one taken while it was off) shows no jump against its own earlier
   * reading, but is off the others all the same. An older reading of another master counts with a wider allowance (the
   * drift factor times the time between the two). Without enough readings of the others nothing
   * is decided: again at the round's review (`last`), when its other readings are in.
   */
  private peerCheck(i: number, last: boolean): void {
    const found = againstPeers(i, this.latest, this.options.tolerance, this.options.driftFactor);
    // Undecided while the round's other readings are still coming: decided again at its review.
    if (found.verdict === 'undecided' && !last) return;
    this.fresh[i] = false;
    if (found.verdict === 'undecided') return;
    this.known[i] = true;
    if (found.verdict === 'outlier') this.distrust(i, found.by, 'disagrees');
    else {
      this.inLine[i] = true;
      this.said[i] = this.saidUnsettled[i] = false; // in line: later news is news again
    }
  }

  /**
   * Master `i`'s votes do not count for the quarantine period from now. The listeners (the
   * engine's re-check of its locks) are told once per episode — a master found off again while
   * still distrusted only has its quarantine extended —, the log once until the master is found
   * in line with the others again.
   */
  private distrust(i: number, jump: number, cause: ClockDistrust['cause']): void {
    const { duration, logger } = this.options;
    const now = monotonicNow();
    const ongoing = this.until[i] > now;
    this.until[i] = now + duration;
    if (ongoing) return;
    this.jumps[i] = jump;
    const node = this.nodes[i];
    const event: ClockDistrust = { node: i, name: node.name, jump, cause, quarantine: duration };
    this.episodes[i] = event;
    for (const l of this.listeners) l(event);
    if (this.said[i]) return;
    this.said[i] = true;
    const amount = `${jump > 0 ? '+' : '−'}${formatMs(Math.abs(jump))}`;
    const what =
      cause === 'jumped'
        ? `clock jumped ${amount} against this engine's monotonic clock`
        : `clock is ${formatMs(Math.abs(jump))} ${jump > 0 ? 'ahead of' : 'behind'} the other masters' (tolerance ${this.options.tolerance} ms)`;
    logger.warn(
      `Redlock: master ${node.name}'s ${what}: keys it holds may expire ${jump > 0 ? 'early' : 'late'}. ` +
        `Its votes do not count for ${formatMs(duration)}, until about ${new Date(Date.now() + duration).toISOString()} ` +
        '(longer while its clock stays off the others), as after a restart without its data; ' +
        'locks that needed its vote are re-checked. Keep the masters\u2019 clocks disciplined ' +
        '(NTP slewing, no steps), or raise `clockTolerance` for masters whose clocks disagree.',
    );
  }
}

/** A master whose clock the engine stopped trusting (see {@link ClockWatch}). */
export interface ClockDistrust {
  /** The master's position. */
  readonly node: number;
  /** Its redacted name. */
  readonly name: string;
  /** How far its clock moved beyond the allowance (or is off the others), ms; + is forward. */
  readonly jump: number;
  /** `jumped`: against its earlier reading; `disagrees`: off the other masters' clocks. */
  readonly cause: 'jumped' | 'disagrees';
  /** How long its votes do not count, ms. */
  readonly quarantine: number;
}
