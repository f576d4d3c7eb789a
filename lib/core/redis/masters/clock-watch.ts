import { formatMs, monotonicNow } from '../../base/clock';
import { withFields } from '../../base/fields';
import type { NodeVote } from '../../base/errors';
import type { RedlockLogger } from '../../base/settings';
import { clockJump, firstContact } from '../../quorum/clocks';
import type { ClockSample } from '../../quorum/clocks';
import type { MasterNode } from './node';

/**
 * The masters' clocks, watched while the engine runs (the rules: quorum/clocks.ts; the promise:
 * docs/guarantees.md, "Clock jumps"). Every acquire and extension reads each standalone master's
 * clock (`TIME`) in the same round trip as its vote — inside the script when the kind's script
 * can carry it (the mutex's: redis/scripts/lua.ts `clockLua`), else as a command of its own sent
 * on the same connection right before the script (redis/masters/dispatch.ts); the reading is
 * judged before the vote counts:
 *
 * - a master with an earlier sample whose clock moved against the engine's monotonic clock by
 *   more than the drift allowance has **jumped**: its keys may have expired early (forward) or
 *   live too long (back), so it is treated like a master that restarted empty — its votes do
 *   not count for the quarantine period (`quarantine.duration`, about maxTtl: by then every lock
 *   it may have lost has ended), counted from the detection, which is after the jump;
 * - a master the engine had no sample of is compared with the other masters: one whose clock is
 *   off the agreeing majority by more than `clockTolerance` is distrusted the same way; while no
 *   majority agrees yet, its vote does not count for that attempt (nothing is started).
 *
 * A distrusted master's sample becomes its new baseline: once its quarantine ended, it votes
 * again, checked against that. Detections are logged once each, reported to the listener (the
 * engine re-checks the locks it holds that counted that master and emits an event) and shown in
 * `health()`. Cluster masters are not sampled (TIME would reach any one of their nodes).
 */
export class ClockWatch {
  /** The accepted sample per master: the baseline of its next rate check. */
  private readonly baseline: (ClockSample | undefined)[];
  /** The latest sample per master of a first contact not yet decided. */
  private readonly contact: (ClockSample | undefined)[];
  /** Monotonic end of each master's clock quarantine (0: none). */
  private readonly until: number[];
  /** The jump (or disagreement) that started it, ms. */
  private readonly jumps: number[];
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
    this.baseline = new Array<ClockSample | undefined>(n).fill(undefined);
    this.contact = new Array<ClockSample | undefined>(n).fill(undefined);
    this.until = new Array<number>(n).fill(0);
    this.jumps = new Array<number>(n).fill(0);
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
   * Sends `TIME` to `node` now (before the vote's script, on the same connection) and records the
   * reading when it comes; `undefined` when the master is not sampled. Never rejects: a master
   * that refuses TIME, or fails, is judged as before, without a sample.
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

  /** Records one reading of master `i`'s clock (the rate check runs here). */
  record(i: number, s: ClockSample): void {
    if (!this.options.enabled) return;
    const prev = this.baseline[i];
    if (!prev) {
      this.contact[i] = s;
      return;
    }
    this.baseline[i] = s;
    const jump = clockJump(prev, s, this.options.driftFactor);
    if (jump !== 0) this.distrust(i, jump, 'jumped');
  }

  /**
   * Whether master `i`'s votes count now: not in a clock quarantine. A first contact is decided
   * here when the samples allow it; one still undecided counts for now, and {@link review}
   * takes it back before the round's verdict.
   */
  counts(i: number): boolean {
    if (this.contact[i]) this.decide(i);
    return !(this.until[i] > monotonicNow());
  }

  /** ms left of master `i`'s clock quarantine (0: none), and the jump that started it. */
  state(i: number): { readonly remaining: number; readonly jump: number } {
    const remaining = Math.max(0, this.until[i] - monotonicNow());
    return { remaining: Math.ceil(remaining), jump: remaining > 0 ? this.jumps[i] : 0 };
  }

  /**
   * Before a round's votes are counted: decides the first contacts it sampled, and turns the
   * `ok` votes of masters whose clock cannot be trusted (distrusted, or a first contact still
   * undecided) into `quarantined`; every such vote gets the time its quarantine has left.
   * Changes `votes` in place; returns how many `ok` votes it turned.
   */
  review(votes: NodeVote[]): number {
    if (!this.options.enabled) return 0;
    for (let i = 0; i < this.contact.length; i++) if (this.contact[i]) this.decide(i);
    const now = monotonicNow();
    let turned = 0;
    for (let k = 0; k < votes.length; k++) {
      const v = votes[k];
      if (v.outcome !== 'ok' && v.outcome !== 'quarantined') continue;
      const i = v.node;
      const distrusted = this.until[i] > now;
      if (!distrusted && !this.contact[i]) continue;
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
   * Reads every connected standalone master's clock now (the engine's start), so that the
   * first votes are judged with every master's sample at hand, not just those of the first
   * replies.
   */
  warm(): void {
    if (!this.options.enabled) return;
    for (const node of this.nodes) if (node.connection.isReady) void this.sample(node);
  }

  /** Decides master `i`'s first contact, if the samples allow it. */
  private decide(i: number): void {
    const latest = this.baseline.map((b, j) => this.contact[j] ?? b);
    const found = firstContact(i, latest, this.options.tolerance, this.options.driftFactor);
    if (found.verdict === 'undecided') return;
    this.baseline[i] = this.contact[i];
    this.contact[i] = undefined;
    if (found.verdict === 'outlier') this.distrust(i, found.by, 'disagrees');
  }

  private distrust(i: number, jump: number, cause: ClockDistrust['cause']): void {
    const { duration, logger } = this.options;
    this.until[i] = monotonicNow() + duration;
    this.jumps[i] = jump;
    const node = this.nodes[i];
    const amount = `${jump > 0 ? '+' : '−'}${formatMs(Math.abs(jump))}`;
    const what =
      cause === 'jumped'
        ? `clock jumped ${amount} against this engine's monotonic clock`
        : `clock is ${formatMs(Math.abs(jump))} ${jump > 0 ? 'ahead of' : 'behind'} the other masters' (tolerance ${this.options.tolerance} ms)`;
    logger.warn(
      `Redlock: master ${node.name}'s ${what}: keys it holds may expire ${jump > 0 ? 'early' : 'late'}. ` +
        `Its votes do not count for ${formatMs(duration)}, until about ${new Date(Date.now() + duration).toISOString()}, ` +
        'as after a restart without its data; locks that needed its vote are re-checked. ' +
        'Keep the masters\u2019 clocks disciplined (NTP slewing, no steps).',
    );
    const event: ClockDistrust = { node: i, name: node.name, jump, cause, quarantine: duration };
    for (const l of this.listeners) l(event);
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
  /** `jumped`: against its earlier sample; `disagrees`: first contact, off the other masters. */
  readonly cause: 'jumped' | 'disagrees';
  /** How long its votes do not count, ms. */
  readonly quarantine: number;
}
