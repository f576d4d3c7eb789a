export { script } from '../scripts/lua';
import { FENCE_COUNTERS_LUA } from '../scripts/fencing';
import { bootMarkerAge } from '../scripts/lua';

/**
 * Lua helpers shared by the scripts of the lock kinds (semaphore, shared). A resource is one key:
 *
 * - a mutex (or the writer of a shared lock) holds it as a STRING: `SET key token NX PX ttl`;
 * - readers of a shared lock and holders of a semaphore hold it as a ZSET: member = token,
 *   score = its expiry in server ms (`TIME`), plus one marker member with score +inf that names
 *   the kind: `#shared` or `#semaphore:<limit>`. The key's TTL is kept at the latest expiry.
 *
 * Tokens never start with `#` (the engine's tokens are base64url), so a token is never taken for
 * the marker; the scripts refuse such a token with an error.
 */
export const KIND_LUA = `
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function num(x)
  return string.format('%.0f', x)
end
-- Kind held at a key: 'none', 'mutex' (a string), 'shared', 'semaphore' (with its limit), or
-- 'foreign' with the Redis type for anything else (e.g. a zset without our marker).
local function kindOf(key)
  local t = redis.call('TYPE', key)['ok']
  if t == 'none' then return 'none', 0, t end
  if t == 'string' then return 'mutex', 0, t end
  if t == 'zset' then
    local m = redis.call('ZRANGEBYSCORE', key, '+inf', '+inf', 'LIMIT', 0, 1)[1]
    if m == '#shared' then return 'shared', 0, t end
    if m then
      local l = string.match(m, '^#semaphore:(%d+)$')
      if l then return 'semaphore', tonumber(l), t end
    end
  end
  return 'foreign', 0, t
end
-- Latest (last = true) or earliest member expiry of a holder zset, nil when it has no holder.
local function expiry(key, last)
  local r
  if last then
    r = redis.call('ZREVRANGEBYSCORE', key, '(+inf', '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
  else
    r = redis.call('ZRANGEBYSCORE', key, '-inf', '(+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  end
  if r[2] then return tonumber(r[2]) end
  return nil
end
-- Removes expired holders (score <= now); deletes the key when no holder is left, otherwise sets
-- its TTL to the latest expiry. Returns the number of live holders.
local function prune(key, now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', num(now))
  local live = redis.call('ZCARD', key) - 1
  if live <= 0 then
    redis.call('DEL', key)
    return 0
  end
  redis.call('PEXPIREAT', key, num(expiry(key, true)))
  return live
end
-- ms until the key expires (0 when it has no TTL or does not exist).
local function pttl(key)
  local p = redis.call('PTTL', key)
  if p < 0 then return 0 end
  return p
end
local function checkToken(token)
  if token == '' or string.sub(token, 1, 1) == '#' then
    return redis.error_reply('ERR lock token must be non-empty and must not start with #')
  end
  return nil
end
`;

/**
 * The boot marker and fencing parts of an acquire script: the same Lua as ACQUIRE_SCRIPT
 * (lib/core/scripts/mutex.ts), with the same argument positions (ARGV[3] fencing flag, ARGV[4]
 * marker flag, ARGV[5] n, ARGV[6] fencing key TTL; fencing counters at KEYS[n+1..2n], the marker
 * at KEYS[#KEYS]). `MARKER_LUA` defines `age`; `FENCING_LUA` appends the counters to `res`.
 */
export const MARKER_LUA = `
local age = -1
if ARGV[4] == '1' then${bootMarkerAge('KEYS[#KEYS]')}
end
`;

export const FENCING_LUA = FENCE_COUNTERS_LUA;
