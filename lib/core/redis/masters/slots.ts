import { keySlot } from '../../base/keys';

/**
 * Groups resources by the Redis Cluster hash slot of their keys, so that each group can run in
 * one script on a Cluster master without CROSSSLOT errors. Order within groups is kept.
 */
export function slotGroups(
  resources: readonly string[],
  keyOf: (resource: string) => string,
): string[][] {
  const groups = new Map<number, string[]>();
  for (const r of resources) {
    const slot = keySlot(keyOf(r));
    const g = groups.get(slot);
    if (g) g.push(r);
    else groups.set(slot, [r]);
  }
  return [...groups.values()];
}
