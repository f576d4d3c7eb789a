/**
 * What the hand-over across processes takes back on the masters (fair/installs.ts; design:
 * lib/core/fair/README.md, "What is released, and when"). Best effort: nothing is
 * awaited, a master that does not answer keeps what it has until it expires.
 */
import { parkKey } from './fair-keys';
import type { RedisContext } from '../redis/context';
import { RELEASE_SCRIPT } from '../redis/scripts/release';
import { UNPARK_SCRIPT } from './unpark-script';

/**
 * Compare-and-delete of `token` at `key` on master `node` only, announced as a release: an
 * install the engine cannot use.
 */
export function releaseKeyOn(store: RedisContext, node: number, key: string, token: string): void {
  const master = store.nodes[node];
  if (!master) return;
  master.evalScript(RELEASE_SCRIPT, [key], [token, '1']).catch(() => undefined);
}

/**
 * Takes the parked `token` of this engine for `resource` off every master where it is still
 * parked (fair/unpark-script.ts): a failed install's token, or one retired when the engine's own
 * attempt was granted, which a later pass or attempt would otherwise install there — a key held
 * by a token nobody can use, until its engine hears the install and deletes it, and a turn lost
 * on that master. Sent before anything the engine sends for the resource afterwards, so a newer
 * token parked later is never taken off.
 */
export function unpark(store: RedisContext, resource: string, token: string): void {
  const keys = [parkKey(store.settings.keyPrefix, resource)];
  const args = [store.engineId, token];
  for (const node of store.nodes) {
    node.evalScript(UNPARK_SCRIPT, keys, args).catch(() => undefined);
  }
}
