/**
 * What a quorum of masters agrees on about one resource (`inspect`): pure, no Redis.
 *
 * Each answering master reports how many live holders it has for the resource and how long
 * until the last of them expires. The engine states only what at least `quorum` masters confirm:
 *
 * - `holders`: the largest h such that at least `quorum` masters report ≥ h holders (0/1 for a
 *   mutex, the count for readers and semaphore holders);
 * - `locked`: `holders ≥ 1` — a quorum of masters has a live holder;
 * - `ttl`: the largest t such that at least `quorum` masters report a holder living ≥ t ms more,
 *   i.e. when a quorum no longer agrees that the resource is held if nobody extends; 0 when not
 *   locked. A key without expiry (never written by the engine) reports `Infinity`, and a quorum
 *   of those gives `ttl: -1`.
 *
 * Only positive evidence counts: a master that reports fewer holders never lowers what others
 * confirm, it just does not help to reach the quorum. Which answers may be used at all (masters
 * down, in restart quarantine) is decided by the caller.
 */

/** One master's report on a resource. */
export interface HolderReport {
  /** Live holders at this master. */
  readonly holders: number;
  /** ms until the last of them expires (0 when none; `Infinity` for a key without expiry). */
  readonly ttl: number;
}

/** What a quorum agrees on. */
export interface AgreedState {
  readonly locked: boolean;
  readonly holders: number;
  readonly ttl: number;
}

/** The `quorum`-th largest value, 0 when fewer values than `quorum`. */
function kth(values: number[], quorum: number): number {
  if (quorum < 1 || values.length < quorum) return 0;
  values.sort((a, b) => b - a);
  return values[quorum - 1];
}

/** See the file comment. */
export function agreedState(reports: readonly HolderReport[], quorum: number): AgreedState {
  const holders = kth(
    reports.map((r) => r.holders),
    quorum,
  );
  if (holders < 1) return { locked: false, holders: 0, ttl: 0 };
  const ttl = kth(
    reports.map((r) => (r.holders > 0 ? Math.max(0, r.ttl) : 0)),
    quorum,
  );
  return { locked: true, holders, ttl: ttl === Infinity ? -1 : Math.round(ttl) };
}
