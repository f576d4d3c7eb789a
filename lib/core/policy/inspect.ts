import { monotonicNow } from '../base/clock';
import { NoQuorumError } from '../base/errors';
import type { ResourceInspection } from '../base/types';
import { MAX_RESOURCE_LENGTH, argError, checkResourceName } from '../base/validate';
import type { LockStore } from '../store';

/**
 * `inspect(resource)`: one read-only round on the store (see quorum/agreement.ts for what is
 * agreed, redis/inspect.ts for the masters). Not an attempt: no event, no retry. Throws
 * `InvalidArgumentError` for a bad resource (before any Redis call), {@link NoQuorumError}
 * when fewer than a quorum of usable masters answered.
 */
export async function inspectResource(
  store: LockStore,
  resource: unknown,
): Promise<ResourceInspection> {
  const name = checkResourceName('resource', resource, MAX_RESOURCE_LENGTH, argError);
  const start = monotonicNow();
  const { state, votes } = await store.inspect(name);
  if (!state) {
    throw new NoQuorumError({
      resources: [name],
      votes,
      attempts: 1,
      elapsed: monotonicNow() - start,
      reason: 'unavailable',
      quorum: store.quorum,
    });
  }
  return { resource: name, locked: state.locked, holders: state.holders, ttl: state.ttl };
}
