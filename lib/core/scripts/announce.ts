/**
 * The release announcements' wire format, in one place for the scripts that publish them
 * (kinds/mutex-scripts.ts RELEASE_SCRIPT, kinds/holder-scripts.ts HOLDERS_RELEASE_SCRIPT) and for the
 * subscriber that reads them (masters/handoff.ts). The channel is named like the lock key; the
 * message is the token (tokens are base64url, so neither prefix can start one), prefixed by
 * what the deletion was.
 */

/**
 * Prefix of the announcement of a failed attempt's clean-up (`~token`, publish flag '2'): it
 * frees the keys of an attempt, not a holder's lock.
 */
export const CLEANUP_PREFIX = '~';

/**
 * Prefix of a yield announcement (`^token`, publish flag '3'): a holder let the waiters of other
 * processes go first (fair/fair-queue.ts). An ordered yield that reserved the key for an
 * engine names it after {@link RESERVED_SEP}: `^token:engineId` (kinds/mutex-scripts.ts RELEASE_SCRIPT).
 */
export const YIELD_PREFIX = '^';

/** Separates a yield's token from the engine the yield reserved the key for (base64url has no ':'). */
export const RESERVED_SEP = ':';

/**
 * Lua statement: publishes the token ARGV[1] on the channel `key` as the publish flag ARGV[2]
 * says: '1' a release, '2' a clean-up; else nothing (the plain RELEASE_SCRIPT).
 */
export function releaseAnnounceLua(key: string): string {
  return `if ARGV[2] == '1' then
      redis.call('PUBLISH', ${key}, ARGV[1])
    elseif ARGV[2] == '2' then
      redis.call('PUBLISH', ${key}, '${CLEANUP_PREFIX}' .. ARGV[1])
    end`;
}

/**
 * Lua statement: publishes the token ARGV[1] on the channel `key` as the publish flag ARGV[2]
 * says (kinds/kind.ts `announceFlag`): '1' a release, '2' a clean-up, '3' a yield (followed by
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
