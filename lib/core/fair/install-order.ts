/**
 * What a yield, a pass or an attempt sends for the hand-over across processes
 * (lib/core/fair/README.md; the installs themselves: fair/installs.ts).
 */
import { monotonicNow } from '../base/clock';
import type { FairAnnounce, YieldOrder } from './fair-mutex';
import { aliveChannel, orderKey, parkKey } from './fair-keys';
import type { RedisContext } from '../redis/context';
import type { FairContext } from './fair-context';

/**
 * Ordered yields: how long (ms) the masters keep a resource that a yield let go for the engine
 * that has waited longest (fair/release-script.ts FAIR_RELEASE_SCRIPT): enough for its head to hear the
 * announcement, wait its race delay (fair/streak.ts `raceDelay`) and reach the masters on a loaded machine. An engine
 * that is gone costs this once: its entry is taken off when reserved.
 *
 * Why the masters: the timed races alone put 11–18% of the rotations out of order (4 processes
 * × 4 callers, bench/multiproc.ts), most likely because on a loaded machine a head
 * is not scheduled within its race step (fair/streak.ts `RACE_STEP_MS`); each engine's count of lost races ranks the
 * heads right, but only a master can refuse the wrong one. The masters order the waiting engines
 * by when each began to wait (the engine sends it: the same score on every master), so they
 * agree on whom to reserve for. With it 96–97% of the rotations were in order and the longest
 * wait 3.0–3.4× the mean instead of 4.0–4.6× (same probe). Safety is untouched: a reservation
 * only refuses.
 */
export const RESERVE_MS = 25;

/**
 * What the release of `resources` sends for ordered yields: a yield or a pass of one resource
 * also reserves it for the engine that waited longest, or installs a parked token
 * (redis/kinds/mutex.ts); only a yield's engine joins the order and parks its next token (`ttl`, the
 * yielding lock's). `undefined` for any other release.
 */
export function yieldOrder(
  store: FairContext,
  resources: readonly string[],
  announce: FairAnnounce | undefined,
  ttl: number | undefined,
  after: string | undefined,
): YieldOrder | undefined {
  const yields = announce === 'yield';
  if ((!yields && announce !== 'pass') || resources.length !== 1) return undefined;
  return {
    keys: [orderKey(store.settings.keyPrefix, resources[0])],
    reserveMs: RESERVE_MS,
    since: yields ? Date.now() : undefined,
    keepMs: store.settings.maxTtl + 1000,
    install: installOrder(store, resources[0], yields ? ttl : undefined, after),
  };
}

/**
 * What a yield of `resource` by `store`'s engine sends for the hand-over across processes: the
 * park key, this engine's own next token when it hears the resource's announcements (parked
 * with `ttl`, the yielding lock's), and what an install needs (the fencing counter when fencing,
 * the boot marker when the quarantine is checked: not on a Cluster).
 */
export function installOrder(
  store: FairContext,
  resource: string,
  ttl: number | undefined,
  after: string | undefined,
): YieldOrder['install'] {
  const { keyPrefix, fencing, fencingKeyTtl, quarantine } = store.settings;
  const park =
    ttl === undefined || !store.hears(store.keyOf(resource))
      ? undefined
      : store.installs.park(resource, ttl, monotonicNow(), Date.now());
  const checked = quarantine.enabled && !store.nodes.some((n) => n.cluster);
  return {
    parkKey: parkKey(keyPrefix, resource),
    token: park?.token ?? '',
    ttl: ttl ?? 0,
    life: park?.life ?? 0,
    fenceKey: fencing ? store.fenceKeyOf(resource) : undefined,
    fenceTtl: fencingKeyTtl,
    marker: checked ? store.markerKey : undefined,
    alive: aliveArg(store),
    after: after ?? '',
  };
}

/**
 * The alive channels' prefix that a yield, a pass or an attempt sends to skip engines that are
 * gone (fair/fair-keys.ts `aliveChannel`); '' on a Cluster, whose subscriber may sit on another
 * node than the key (not checked there).
 */
export function aliveArg(store: RedisContext): string {
  return store.nodes.some((n) => n.cluster) ? '' : aliveChannel(store.settings.keyPrefix, '');
}
