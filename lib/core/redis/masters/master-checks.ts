import { monotonicNow } from '../../base/clock';
import type { RedlockLogger } from '../../base/settings';
import { MARKER_AGE_SCRIPT } from '../scripts/marker';
import { judgeMasters, probeMaster, withoutUndefined } from './assumptions';
import type { MasterFacts, MasterVerdict } from './assumptions';
import type { MasterNode } from './node';

/** How often masters that cannot vote (or whose facts are unknown) are asked again. */
const RECHECK_MS = 10_000;
/** How often the other masters are asked again (a promotion, an ACL or CONFIG change). */
const RECHECK_USABLE_MS = 60_000;

/** What {@link MasterChecks.healthOf} adds to a master's health. */
export interface CheckedHealth {
  /** Why its votes do not count (base/types.ts `MasterHealth.unusable`). */
  readonly unusable?: string;
  /** Its `maxmemory-policy`, when it may evict lock keys. */
  readonly evictionPolicy?: string;
  /** What could not be checked, and why. */
  readonly unchecked?: readonly string[];
}

interface State {
  facts: MasterFacts | undefined;
  verdict: MasterVerdict;
  /** While the check after a (re)connect runs: acquires on this master wait for it. */
  waiting: { promise: Promise<void>; resolve(): void } | undefined;
  /** While its votes must not count: rejects with the cause (made once, a handler attached). */
  refused: Promise<never> | undefined;
  /** Bumped by every check: only the latest one's answer is kept. */
  seq: number;
  /** When (monotonic) it was last asked; `-Infinity` never. */
  checkedAt: number;
  /** The warnings already logged about it (each said once while it stays true). */
  said: Set<string>;
}

/**
 * The engine's checks of its masters' assumptions (redis/masters/assumptions.ts): after every
 * (re)connect and now and then while running, each standalone master is asked what it is. A
 * master whose votes must not count — a replica, a Sentinel, a server whose ACL refuses scripts,
 * a second listing of one server (same `run_id`) — is refused in every round with its cause (a
 * vote `error` naming it, instead of a misleading `held` or a silent error), logged once and
 * reported `unusable` by `health()`; a master that may evict lock keys is warned about once and
 * reported (warned, not refused: see docs/operations.md). Acquires wait for a master's check
 * after its (re)connect, as they wait for the restart quarantine's (redis/masters/node.ts), so no
 * vote of an unchecked master is counted. Cluster masters are not asked (INFO and CONFIG reach
 * one node of the Cluster only).
 */
export class MasterChecks {
  private readonly states: State[];
  private readonly timer: NodeJS.Timeout;
  private closed = false;
  /** How many masters are refused now (0: rounds send as they would without the checks). */
  private refusing = 0;
  /** How many checks after a (re)connect are running (0: nothing to wait for). */
  private pending = 0;

  constructor(
    private readonly nodes: readonly MasterNode[],
    private readonly logger: RedlockLogger,
    private readonly markerKey: string,
    /** ms each check may take (redis/store.ts gives the request timeout, at least 1 s). */
    private readonly timeout: number,
  ) {
    this.states = nodes.map(() => ({
      facts: undefined,
      verdict: { unchecked: [] },
      waiting: undefined,
      refused: undefined,
      seq: 0,
      checkedAt: -Infinity,
      said: new Set<string>(),
    }));
    for (const node of nodes) {
      if (node.cluster) continue;
      node.afterConnect = (n) => void this.check(n, true);
      if (node.connection.isReady) void this.check(node, true);
    }
    this.timer = setInterval(() => this.recheck(), RECHECK_MS);
    this.timer.unref?.();
  }

  /**
   * What an acquire on `node` waits for before it is sent: `undefined` (nothing), the check after
   * its (re)connect, or a rejection with the cause while its votes must not count. It waits for
   * the first check of an earlier-listed master too (which may find `node` to be its duplicate:
   * both would vote otherwise), never for a later check of one (a known master that reconnects
   * does not hold up the others' votes; a new `run_id` cannot make it another master's
   * duplicate). For a master never checked and not connected, a PING first (as
   * redis/masters/node.ts `ready`): a queued acquire is sent after the check its reconnect starts.
   */
  gate(node: MasterNode): Promise<void> | undefined {
    if (this.pending === 0 && this.refusing === 0) {
      if (this.states[node.index].checkedAt !== -Infinity || node.cluster) return undefined;
      if (node.connection.isReady) return undefined;
      return node.connection.ping().then(() => this.gate(node));
    }
    const waits: Promise<void>[] = [];
    for (let i = 0; i <= node.index; i++) {
      const s = this.states[i];
      if (s.waiting && (i === node.index || s.facts === undefined)) waits.push(s.waiting.promise);
    }
    if (waits.length > 0) return Promise.all(waits).then(() => this.states[node.index].refused);
    return this.states[node.index].refused;
  }

  /** Rejects with the cause while `node`'s votes must not count; `undefined` otherwise. */
  refusal(node: MasterNode): Promise<never> | undefined {
    return this.refusing === 0 ? undefined : this.states[node.index].refused;
  }

  /** Whether any master is refused now (see {@link refusal}). */
  get refusesAny(): boolean {
    return this.refusing > 0;
  }

  /** What health() says about the master at `index` beyond reachability and quarantine. */
  healthOf(index: number): CheckedHealth {
    const { verdict } = this.states[index];
    return withoutUndefined({
      unusable: verdict.unusable,
      evictionPolicy: verdict.evicts,
      unchecked: verdict.unchecked.length > 0 ? verdict.unchecked : undefined,
    });
  }

  /** Stops the periodic checks (engine close); checks under way end without effect. */
  close(): void {
    this.closed = true;
    clearInterval(this.timer);
    for (const node of this.nodes) node.afterConnect = undefined;
    for (const s of this.states) this.endWait(s);
  }

  private recheck(): void {
    const now = monotonicNow();
    for (const node of this.nodes) {
      const s = this.states[node.index];
      if (node.cluster || !node.connection.isReady) continue;
      const due = s.verdict.unusable !== undefined || s.facts === undefined;
      if (due || now - s.checkedAt >= RECHECK_USABLE_MS) void this.check(node, false);
    }
  }

  /** Asks `node` what it is; after a (re)connect (`connected`), acquires on it wait meanwhile. */
  private async check(node: MasterNode, connected: boolean): Promise<void> {
    if (this.closed) return;
    const s = this.states[node.index];
    if (connected && !s.waiting) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      s.waiting = { promise, resolve };
      this.pending++;
    }
    const seq = ++s.seq;
    const facts = await probeMaster(node.connection, this.timeout, node.redact, () =>
      node.evalScript(MARKER_AGE_SCRIPT, [this.markerKey], []),
    );
    if (this.closed || seq !== s.seq) return;
    s.checkedAt = monotonicNow();
    if (facts) s.facts = facts; // no answer in time: what was known stands
    this.judge();
    this.endWait(s);
  }

  private endWait(s: State): void {
    const waiting = s.waiting;
    if (!waiting) return;
    s.waiting = undefined;
    this.pending--;
    waiting.resolve();
  }

  /** Judges every master again (a duplicate depends on the others), and says what changed. */
  private judge(): void {
    const names = this.nodes.map((n) => n.name);
    const verdicts = judgeMasters(
      this.states.map((s) => s.facts),
      names,
    );
    verdicts.forEach((verdict, i) => {
      const s = this.states[i];
      const was = s.verdict.unusable;
      s.verdict = verdict;
      if (verdict.unusable !== was) {
        if (verdict.unusable === undefined) {
          this.refusing--;
          s.refused = undefined;
        } else {
          if (was === undefined) this.refusing++;
          const refused = Promise.reject(new Error(`master cannot vote: ${verdict.unusable}`));
          refused.catch(() => undefined); // rejected with nobody waiting: not unhandled
          s.refused = refused;
        }
      }
      this.report(i, names[i], verdict, was);
    });
  }

  /** Logs, once while each stays true: a master that cannot vote, one that may evict lock keys. */
  private report(i: number, name: string, verdict: MasterVerdict, was: string | undefined): void {
    const { said } = this.states[i];
    const say = (key: string, message: string, warn = true): void => {
      if (said.has(key)) return;
      said.add(key);
      if (warn) this.logger.warn(message);
      else this.logger.debug?.(message);
    };
    const who = `master ${name} (clients[${i}])`;
    if (verdict.unusable !== undefined) {
      const config = verdict.notIndependent;
      // Said again when it turns out to be a configuration error too (another master's facts
      // came later).
      say(
        `unusable:${verdict.unusable}|${verdict.notIndependent ?? ''}`,
        `Redlock: ${who} cannot vote: ${verdict.unusable}. ` +
          (config !== undefined && config !== verdict.unusable
            ? `Configuration error: ${config}. `
            : config !== undefined
              ? 'Configuration error: counting one server twice would break the majority. '
              : '') +
          'Its votes do not count; health() reports it unusable. ' +
          (config !== undefined
            ? 'Redlock needs independent masters: list each master once, never a replica of another.'
            : 'Fix it or list another master.'),
      );
    } else if (was !== undefined) {
      for (const key of [...said]) if (key.startsWith('unusable:')) said.delete(key);
      this.logger.warn(`Redlock: ${who} can vote again (it was refused: ${was}).`);
    }
    if (verdict.evicts !== undefined) {
      say(
        `evicts:${verdict.evicts}`,
        `Redlock: ${who} may evict lock keys: maxmemory is set with maxmemory-policy ` +
          `${verdict.evicts}, so under memory pressure it can drop a held lock (that vote is ` +
          'lost, like a restart without its data). Set maxmemory-policy noeviction on lock masters.',
      );
    } else {
      for (const key of [...said]) if (key.startsWith('evicts:')) said.delete(key);
    }
    for (const note of verdict.unchecked) {
      say(`unchecked:${note}`, `Redlock: ${who}: not checked: ${note}.`, false);
    }
  }
}
