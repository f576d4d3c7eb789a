/**
 * The release announcements' wire format, in one place for the scripts that publish them
 * (redis/scripts/release.ts RELEASE_SCRIPT, redis/kinds/holder-scripts.ts HOLDERS_RELEASE_SCRIPT) and for the
 * subscriber that reads them (redis/masters/handoff.ts). The channel is named like the lock key; the
 * message is the token (tokens are base64url, so no prefix can start one), prefixed by what the
 * deletion was. The fair mode adds its own forms (fair/yield-announce.ts).
 */

/**
 * Prefix of the announcement of a failed attempt's clean-up (`~token`, publish flag '2'): it
 * frees the keys of an attempt, not a holder's lock.
 */
export const CLEANUP_PREFIX = '~';

/**
 * Lua statement: publishes the token ARGV[1] on the channel `key` as the publish flag ARGV[2]
 * says: '1' a release, '2' a clean-up; else nothing (redis/kinds/kind.ts `announceFlag`).
 */
export function releaseAnnounceLua(key: string): string {
  return `if ARGV[2] == '1' then
      redis.call('PUBLISH', ${key}, ARGV[1])
    elseif ARGV[2] == '2' then
      redis.call('PUBLISH', ${key}, '${CLEANUP_PREFIX}' .. ARGV[1])
    end`;
}
