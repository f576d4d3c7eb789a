/** The mutex's `lockAtLeastFor` release (see policy/release.ts). */
import { script } from './lua';

/**
 * Keep: compare-and-pexpire of the release of a lock whose `lockAtLeastFor` has not passed. Each
 * key that still holds `token` gets the TTL `ms` (the remainder of `lockAtLeastFor`, at most the
 * engine's maxTtl) instead of being deleted; a key that is no longer ours is left alone. Nothing
 * is published: the resource stays locked, waiters have nothing to retry for.
 *
 * KEYS, ARGV, reply: the layout below (docs/scripts.md).
 */
export const KEEP_SCRIPT = script(
  'keep',
  `
local kept = 0
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
    kept = kept + 1
  end
end
return kept
`,
  {
    keys: [{ name: 'lock keys', count: 'rest' }],
    argv: [{ name: 'token' }, { name: 'ms: the TTL the kept keys get' }],
    reply: 'the number of keys kept',
  },
);
