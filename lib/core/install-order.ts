/**
 * What a yield, a pass or an attempt sends for the hand-over across processes
 * (lib/core/fair/README.md; the installs themselves: redis-install.ts).
 */
import { monotonicNow } from './clock';
import type { YieldOrder } from './kinds/kind';
import { aliveChannel, parkKey } from './kinds/kind-keys';
import type { RedisContext } from './redis-context';

/**
 * What a yield of `resource` by `store`'s engine sends for the hand-over across processes: the
 * park key, this engine's own next token when it hears the resource's announcements (parked
 * with `ttl`, the yielding lock's), and what an install needs (the fencing counter when fencing,
 * the boot marker when the quarantine is checked: not on a Cluster).
 */
export function installOrder(
  store: RedisContext,
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
 * gone (kinds/kind-keys.ts `aliveChannel`); '' on a Cluster, whose subscriber may sit on another
 * node than the key (not checked there).
 */
export function aliveArg(store: RedisContext): string {
  return store.nodes.some((n) => n.cluster) ? '' : aliveChannel(store.settings.keyPrefix, '');
}
