/**
 * The give-up side of the writer-waiting flag for the Redis store (redis/kinds/writer-flag.ts,
 * docs/lock-kinds.md "Writer starvation policy"): a retrying plain acquire that ends without a
 * lock takes down the flags its engine raised, so that readers resume at once instead of when
 * the readers it waited for would have expired.
 */
import { waitKey } from '../base/keys';
import { WRITER_GAVE_UP_SCRIPT } from './kinds/writer-flag';
import type { RedisContext } from './context';

/**
 * Sends {@link WRITER_GAVE_UP_SCRIPT} for the flags of `resources` to every master (one call per
 * slot group on a Cluster). Best effort and not awaited, like the poll marks' take-down: a master
 * that does not answer keeps its flag until it expires.
 */
export function endWriterWait(store: RedisContext, resources: readonly string[]): void {
  const prefix = store.settings.keyPrefix;
  const args = [store.engineId];
  for (const node of store.nodes) {
    store.dispatch
      .grouped(node, resources, [], (_keys, group) => ({
        script: WRITER_GAVE_UP_SCRIPT,
        keys: group.map((r) => waitKey(prefix, r)),
        args,
      }))
      .catch(() => undefined);
  }
}
