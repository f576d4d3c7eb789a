/**
 * Extend and release for the holder-set kinds (shared readers, semaphore holders); inspecting
 * any kind: redis/scripts/inspect.ts. Layout and reply shapes: docs/lock-kinds.md. Helpers (`prune`,
 * `expiry`, ...): redis/scripts/kind-lua.ts (inlined templates).
 */
import { releaseAnnounceLua } from '../scripts/announce';
import {
  CHECK_TOKEN_LUA,
  NOW_LUA,
  TOKEN_ERROR_REPLY,
  expiry,
  num,
  prune,
  script,
} from '../scripts/kind-lua';

/**
 * Extend: all-or-nothing compare-and-pexpire of one holder. Every key must be a holder zset in
 * which `token` is a live member (score > now); then its expiry becomes now + ttl and the key's
 * TTL the latest expiry. Never re-creates: a missing key, a missing or already expired member, or
 * a key of another type changes nothing and answers 0. A shorter ttl shortens the membership.
 *
 * KEYS, ARGV, reply: the layout below (docs/scripts.md).
 */
export const HOLDERS_EXTEND_SCRIPT = script(
  'holders-extend',
  `${CHECK_TOKEN_LUA}${NOW_LUA}
for i = 1, #KEYS do
  if redis.call('TYPE', KEYS[i])['ok'] ~= 'zset' then return 0 end
  local s = tonumber(redis.call('ZSCORE', KEYS[i], ARGV[1]))
  if (not s) or s <= now then return 0 end
end
local exp = ${num('now + tonumber(ARGV[2])')}
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], 'XX', exp, ARGV[1])
  redis.call('PEXPIREAT', KEYS[i], ${num(expiry('KEYS[i]', true))})
end
return 1
`,
  {
    keys: [{ name: 'lock keys', count: 'rest' }],
    argv: [{ name: 'token' }, { name: 'ttl (ms)' }],
    reply: '`1` every key was extended; else `0`, nothing changed. ' + TOKEN_ERROR_REPLY,
  },
);

/**
 * Release: removes `token` from each key where it is a member (only there: other holders and
 * other kinds are untouched), prunes expired holders, deletes the key when the last holder left,
 * else sets its TTL to the latest remaining expiry. A removed membership that was still live
 * counts and, with the publish flag, publishes the token on the key's channel (named like the
 * key, as RELEASE_SCRIPT does): a slot of a semaphore is free, or a reader left.
 *
 * With ARGV[3] (`keepFor`, ms > 0: lockAtLeastFor), a live membership is not removed: its expiry
 * becomes now + keepFor and the key's TTL the latest member's; nothing is published. Expired
 * memberships and keys of other kinds are left alone, each key on its own.
 *
 * KEYS, ARGV, reply: the layout below (docs/scripts.md).
 */
export const HOLDERS_RELEASE_SCRIPT = script(
  'holders-release',
  `${CHECK_TOKEN_LUA}${NOW_LUA}
local removed = 0
local keep = tonumber(ARGV[3] or '0')
for i = 1, #KEYS do
  if redis.call('TYPE', KEYS[i])['ok'] == 'zset' then
    local s = tonumber(redis.call('ZSCORE', KEYS[i], ARGV[1]))
    if s and keep > 0 then
      if s > now then
        redis.call('ZADD', KEYS[i], 'XX', ${num('now + keep')}, ARGV[1])
        redis.call('PEXPIREAT', KEYS[i], ${num(expiry('KEYS[i]', true))})
        removed = removed + 1
      end
    elseif s then
      -- The one place a membership ends.
      redis.call('ZREM', KEYS[i], ARGV[1])${prune('KEYS[i]')}
      if s > now then
        removed = removed + 1
        ${releaseAnnounceLua('KEYS[i]')}
      end
    end
  end
end
return removed
`,
  {
    keys: [{ name: 'lock keys', count: 'rest' }],
    argv: [
      { name: 'token' },
      { name: "publish flag: '0' none, '1' a release, '2' a clean-up (`~token`)" },
      { name: 'keepFor (ms): keep the live memberships this long instead', when: 'lockAtLeastFor' },
    ],
    reply:
      'the number of keys where a live membership was removed (or kept for keepFor). ' +
      TOKEN_ERROR_REPLY,
  },
);
