/**
 * Counting semaphore (`limit: n`) on one master. The master admits at most `limit` live holders;
 * a holder is granted when semaphoreQuorum(N, n) masters admitted it (lib/core/quorum/kind-rules.ts — a plain
 * majority is not enough for n > 1). Key layout and reply shapes: docs/lock-kinds.md.
 */
import {
  ACQUIRE_ARGV,
  MARKER_AGE_REPLY,
  CHECK_TOKEN_LUA,
  TOKEN_ERROR_REPLY,
  addHolder,
  FENCING_LUA,
  MARKER_LUA,
  NOW_LUA,
  expiry,
  kindOf,
  prune,
  pttl,
  script,
} from '../scripts/kind-lua';

/**
 * Acquire: all-or-nothing over several resources, like ACQUIRE_SCRIPT (same keys, same first six
 * arguments, same reply shape, plus one status). KEYS, ARGV, reply: the layout below
 * (docs/scripts.md).
 *
 * Per key, expired holders are pruned first (server TIME), then:
 * - free, or a `#semaphore:<limit>` zset with fewer than `limit` live holders: admissible;
 * - the same semaphore, full: {0, age, ms until its earliest holder expires};
 * - any other kind (a mutex string, shared readers, another limit, a foreign type):
 *   {-1, age, pttl of the key, found kind, found limit} — mixing kinds is an error, not contention.
 * When every key is admissible, the token is added to each (score = now + ttl, key TTL = latest
 * expiry) and the reply is {1, age} followed by one fencing counter per key when fencing is on.
 * `age` is the boot marker's age exactly as in ACQUIRE_SCRIPT (-1 when not checked).
 */
export const SEMAPHORE_ACQUIRE_SCRIPT = script(
  'semaphore-acquire',
  `${CHECK_TOKEN_LUA}
local n = tonumber(ARGV[5])
local limit = tonumber(ARGV[7])
if (not limit) or limit < 1 or limit ~= math.floor(limit) then
  return redis.error_reply('ERR semaphore limit must be a positive integer')
end
${MARKER_LUA}${NOW_LUA}
for i = 1, n do${kindOf('KEYS[i]')}
  if kind == 'semaphore' and l == limit then${prune('KEYS[i]')}
    if live >= limit and not redis.call('ZSCORE', KEYS[i], ARGV[1]) then
      return {0, age, ${expiry('KEYS[i]', false)} - now}
    end
  elseif kind ~= 'none' then
    if kind == 'foreign' then kind = 'foreign:' .. t end
    return {-1, age, ${pttl('KEYS[i]')}, kind, l}
  end
end
${addHolder("'#semaphore:' .. limit")}
local res = {1, age}
${FENCING_LUA}
return res
`,
  {
    keys: [
      { name: 'lock keys', count: 'n' },
      { name: 'fencing counters', count: 'n', when: "ARGV[3] == '1'" },
      { name: 'boot marker', last: true, when: "ARGV[4] ~= '0'" },
    ],
    argv: ACQUIRE_ARGV.concat([{ name: 'limit: the most live holders' }]),
    reply:
      '`{1, age, ...counters}` granted (one fencing counter per key when fencing is on); ' +
      '`{0, age, ms}` the same semaphore is full (ms until its earliest holder expires); ' +
      '`{-1, age, pttl, kind, limit}` another kind at a key (nothing written). ' +
      MARKER_AGE_REPLY +
      ' ' +
      TOKEN_ERROR_REPLY +
      ' An error reply when the limit is not a positive integer.',
  },
);
