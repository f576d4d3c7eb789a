/**
 * The fair mode's announcement forms, beside the plain ones (redis/scripts/announce.ts: a release is the
 * token, a clean-up `~token`): a yield `^token`, which may name the engine it reserved the key for
 * and the parked token it installed (fair-announcements.ts reads them).
 */
import { CLEANUP_PREFIX } from '../redis/scripts/announce';

/**
 * Prefix of a yield announcement (`^token`, publish flag '3'): a holder let the waiters of other
 * processes go first (fair-queue.ts). An ordered yield that reserved the key for an
 * engine names it after {@link RESERVED_SEP}: `^token:engineId` (release-script.ts).
 */
export const YIELD_PREFIX = '^';

/** Separates a yield's token from the engine the yield reserved the key for (base64url has no ':'). */
export const RESERVED_SEP = ':';

/**
 * Lua statement: publishes the token ARGV[1] on the channel `key` as the publish flag ARGV[2]
 * says (fair-mutex.ts; redis/kinds/kind.ts `announceFlag`): '1' a release, '2' a clean-up, '3' a yield (followed by
 * the Lua string expression `yieldSuffix`, when given), '4' a pass: as a yield when
 * `yieldSuffix` names an engine (not ''), else as a release; else nothing.
 */
export function publishLua(key: string, yieldSuffix?: string): string {
  const suffix = yieldSuffix === undefined ? '' : ` .. ${yieldSuffix}`;
  return `if ARGV[2] == '1' then
  redis.call('PUBLISH', ${key}, ARGV[1])
elseif ARGV[2] == '2' then
  redis.call('PUBLISH', ${key}, '${CLEANUP_PREFIX}' .. ARGV[1])
elseif ARGV[2] == '3' then
  redis.call('PUBLISH', ${key}, '${YIELD_PREFIX}' .. ARGV[1]${suffix})
elseif ARGV[2] == '4' then
  if ${yieldSuffix ?? "''"} == '' then
    redis.call('PUBLISH', ${key}, ARGV[1])
  else
    redis.call('PUBLISH', ${key}, '${YIELD_PREFIX}' .. ARGV[1]${suffix})
  end
end`;
}
