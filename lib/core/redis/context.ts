import type { Announce, LockKind, ScriptCall } from './kinds/kind';
import type { LockKindSpec } from '../base/kind-spec';
import type { ClockWatch } from './masters/clock-watch';
import type { Dispatch } from './masters/dispatch';
import type { MasterNode } from './masters/node';
import type { Grant } from '../store';
import type { ReleaseResult } from '../quorum/protocol';
import type { RoundSpec, Tally } from '../quorum/round';
import type { ResolvedSettings } from '../base/settings';

/**
 * What the Redis operations — one attempt (redis/attempt.ts), an extension (redis/extend.ts), an
 * inspection (redis/inspect.ts), and the fair mode's installs (fair/installs.ts) — need of the
 * masters: the masters and how to send to them,
 * the keys, the settings, one voting round, and the releases a failed attempt sends. The Redis
 * store (redis/store.ts) provides it; the operations never see the store itself.
 */
export interface RedisContext {
  readonly settings: ResolvedSettings;
  /** The masters, in the order of the clients. */
  readonly nodes: readonly MasterNode[];
  /** Per-master sending: readiness gate, Cluster slot groups, script fallback. */
  readonly dispatch: Dispatch;
  /** The masters' clocks, read with every acquire and extension vote (redis/masters/clock-watch.ts). */
  readonly clocks: ClockWatch;
  /** Votes needed for a decision (the configured quorum). */
  readonly quorum: number;
  /** The boot marker's key (restart quarantine). */
  readonly markerKey: string;
  /** This engine's id, the first characters of each of its tokens (base/token.ts). */
  readonly engineId: string;
  /** The lock key of `resource`. */
  keyOf(resource: string): string;
  /** The fencing counter's key of `resource`. */
  fenceKeyOf(resource: string): string;
  /** The lock kind of a request or grant (the mutex by default). */
  kindOf(spec: LockKindSpec | undefined): LockKind;
  /** Votes a lock of `spec`'s kind needs. */
  quorumFor(spec: LockKindSpec | undefined): number;
  /** One voting round over every master (quorum/round.ts); `quorum` defaults to {@link quorum}. */
  round<T>(spec: RoundRequest<T>): Promise<Tally<T>>;
  /** A master answered with a fully checked boot-marker age (redis/masters/node.ts `knownBirth`). */
  noteMarkerAge(node: MasterNode): void;
  /** Annotates a round's `quarantined` votes and tells the logger (once per master). */
  noteQuarantined(tally: Tally<{ readonly markerAge: number | undefined }>): void;
  /** Compare-and-delete of `token` (redis/store.ts `releaseKeys`). */
  releaseKeys(
    resources: readonly string[],
    token: string,
    options: ReleaseKeysOptions,
  ): Promise<ReleaseResult>;
  /** Releases a grant on the masters (store.ts `LockStore.release`). */
  release(grant: Grant, waitAll: boolean): Promise<ReleaseResult>;
  /** The clean-up of an own failed attempt wakes other engines' waiters, not this engine's. */
  ignoreOwn(resources: readonly string[], token: string, cleanup: boolean): void;
}

/** A voting round's request, without what the store fills in. */
export type RoundRequest<T> = Omit<
  RoundSpec<MasterNode, T>,
  'masters' | 'quorum' | 'describeError'
> & {
  readonly quorum?: number;
};

/** Options of {@link RedisContext.releaseKeys}. */
export interface ReleaseKeysOptions {
  /** On these masters only. */
  readonly only?: readonly MasterNode[];
  /** Wait for every master, not a quorum. */
  readonly waitAll?: boolean;
  /** How the deletion is announced to waiters (redis/kinds/kind.ts `Announce`). */
  readonly announce: Announce;
  readonly kind?: LockKindSpec;
  /** lockAtLeastFor: keep the keys for this many ms instead of deleting them. */
  readonly keepFor?: number;
  /**
   * The script call for `keys` (the keys of `resources`: all of them, or one Cluster slot
   * group), when not the kind's own release.
   */
  readonly call?: (keys: readonly string[], resources: readonly string[]) => ScriptCall;
}
