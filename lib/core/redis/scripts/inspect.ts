/** The read-only inspect script (`Redlock.inspect`, lib/core/redis/inspect.ts). */
import { script } from './lua';

/**
 * Inspect one resource on one master, read-only: no write command (expired holders are skipped,
 * not pruned; the boot marker is read, never created). Reads every kind at the lock key
 * (docs/lock-kinds.md, "Key layout"): a string is a mutex (or writer) holder, a zset with our
 * marker member holds readers or semaphore holders with their expiry as score.
 *
 * Its first five fields are decoded by `decodeInspect` (redis/kinds/kind.ts); the kind is told
 * with the checks inlined (a Lua function definition would be re-created on every call), and the
 * boot marker's age is appended, so that one call also tells whether the master is in restart
 * quarantine. The writer-waiting flag is not read (`waiting` is always 0).
 *
 * KEYS, ARGV, reply: the layout below (docs/scripts.md).
 */
export const INSPECT_READ_SCRIPT = script(
  'inspect-read',
  `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local age = -1
if ARGV[1] == '1' then
  local birth = tonumber(redis.call('GET', KEYS[2]))
  if birth then age = now - birth end
end
local ty = redis.call('TYPE', KEYS[1])['ok']
if ty == 'none' then return {'none', 0, 0, 0, 0, age} end
if ty == 'string' then return {'mutex', 1, redis.call('PTTL', KEYS[1]), 0, 0, age} end
if ty == 'zset' then
  local m = redis.call('ZRANGEBYSCORE', KEYS[1], '+inf', '+inf', 'LIMIT', 0, 1)[1]
  local kind = nil
  local limit = 0
  if m == '#shared' then
    kind = 'shared'
  elseif m then
    local l = string.match(m, '^#semaphore:(%d+)$')
    if l then
      kind = 'semaphore'
      limit = tonumber(l)
    end
  end
  if kind then
    local holders = redis.call('ZCOUNT', KEYS[1], '(' .. string.format('%.0f', now), '(+inf')
    local ttl = 0
    if holders > 0 then
      local last = redis.call('ZREVRANGEBYSCORE', KEYS[1], '(+inf', '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
      ttl = tonumber(last[2]) - now
    end
    return {kind, holders, ttl, limit, 0, age}
  end
end
return {'foreign:' .. ty, 0, redis.call('PTTL', KEYS[1]), 0, 0, age}
`,
  {
    keys: [{ name: 'lock key' }, { name: 'boot marker', when: "ARGV[1] == '1'" }],
    argv: [{ name: "marker flag: '1' read the boot marker" }],
    reply:
      "`{kind, holders, ttl, limit, 0, markerAge}`: kind `'none'`, `'mutex'`, `'shared'`, " +
      "`'semaphore'` or `'foreign:<redis type>'`; holders, the live holders (a mutex counts 1); " +
      'ttl, ms until the last live holder expires (0 when free, -1 for a key without expiry); ' +
      "limit, the semaphore's limit (else 0); markerAge, the boot marker's age in ms (server " +
      'clock), -1 when missing or not asked',
  },
);
