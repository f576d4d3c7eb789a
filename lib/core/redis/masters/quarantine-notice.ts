import { withFields } from '../../base/fields';
import { formatMs, monotonicNow } from '../../base/clock';
import type { NodeVote } from '../../base/errors';
import type { SeedCause } from './node';
import type { RedlockLogger } from '../../base/settings';

/** Why a master is in restart quarantine, as told to operators. */
export type QuarantineCause = SeedCause | 'young';

const WHY: Record<QuarantineCause, string> = {
  new:
    'never seen before by any engine with this key prefix: new, restarted without its data, ' +
    'flushed, or a key prefix new to it',
  restarted: 'restarted since an engine last checked it: its data may be an old snapshot',
  known: 'restarted recently',
  young:
    'data set younger than the quarantine: restarted without its data, flushed, or a key ' +
    'prefix new to it',
};

interface Entry {
  readonly name: string;
  readonly remaining: number;
  readonly cause: QuarantineCause;
}

/**
 * Explains restart quarantine to operators : a new engine on freshly
 * started masters refuses every lock for up to `maxTtl`, and nothing but a log line can say why.
 *
 * Each master's quarantine is announced ONCE through `logger.warn` when the engine first sees it
 * (post-connect check, or an acquire vote), not on every attempt: which masters (redacted
 * addresses), why, for how much longer, and the settings that skip it. Masters entering together
 * share one line — notes are collected for a short moment, or until the attempt that saw them ends.
 */
export class QuarantineNotice {
  /** Per master (index): local monotonic time at which its announced quarantine ends. */
  private readonly until = new Map<number, number>();
  private batch = new Map<number, Entry>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly logger: RedlockLogger,
    /** How long notes wait for other masters' notes before they are logged. */
    private readonly gatherMs: number,
  ) {}

  /** A master is in quarantine for `remaining` more ms. Logs (soon) if that is news. */
  note(node: { index: number; name: string }, remaining: number, cause: QuarantineCause): void {
    if (!(remaining > 0)) return;
    const now = monotonicNow();
    const end = now + remaining;
    const known = this.until.get(node.index);
    this.until.set(node.index, Math.max(known ?? 0, end));
    // Already announced and not over, unless it restarted again (the end moved by over a second).
    if (known !== undefined && known > now && end <= known + 1000) return;
    this.batch.set(node.index, { name: node.name, remaining, cause });
    if (!this.timer) {
      this.timer = setTimeout(() => this.flush(), this.gatherMs);
      this.timer.unref?.();
    }
  }

  /** Logs the collected notes now, as one line. */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.batch.size === 0) return;
    const entries = [...this.batch.values()];
    this.batch = new Map();
    const groups = new Map<QuarantineCause, Entry[]>();
    for (const e of entries) groups.set(e.cause, [...(groups.get(e.cause) ?? []), e]);
    const parts = [...groups].map(([cause, group]) => {
      const longest = Math.max(...group.map((e) => e.remaining));
      const until = new Date(Date.now() + longest).toISOString();
      return `${group.map((e) => e.name).join(', ')} (${WHY[cause]}) for up to ${formatMs(longest)} more, until about ${until}`;
    });
    const one = entries.length === 1;
    const count = one ? 'master' : `${entries.length} masters`;
    const votes = one
      ? 'Its vote does not count until every lock it may have lost has expired. '
      : 'Their votes do not count until every lock they may have lost has expired. ';
    this.logger.warn(
      `Redlock: ${count} in restart quarantine: ${parts.join('; ')}. ` +
        votes +
        'For throwaway dev masters set `quarantine: false`; masters that persist every write ' +
        '(appendonly yes with appendfsync always) are trusted at once.',
    );
  }

  /** Stops the pending log timer (engine close). */
  close(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}

/**
 * Adds `quarantineRemaining` to the `quarantined` votes of an acquire or extension round, from the marker age
 * each master reported (`ageOf`), and tells `notice` about them. Changes `votes` in place.
 */
export function annotateQuarantined(
  votes: NodeVote[],
  ageOf: (index: number) => number | undefined,
  duration: number,
  notice: QuarantineNotice,
): void {
  votes.forEach((v, i) => {
    if (v.outcome !== 'quarantined') return;
    const age = ageOf(i);
    if (age === undefined) return;
    const remaining = Math.max(1, duration - Math.max(0, age));
    votes[i] = withFields(v, { quarantineRemaining: remaining });
    notice.note({ index: v.node, name: v.name }, remaining, 'young');
  });
}
