export { script } from './lua';
import { FENCE_COUNTERS_LUA } from './fencing';
import { bootMarkerAge } from './lua';
import type { ScriptSlot } from './lua';

/**
 * Lua building blocks of the lock kinds' scripts (semaphore, shared, holder sets). A resource is
 * one key:
 *
 * - a mutex (or the writer of a shared lock) holds it as a STRING: `SET key token NX PX ttl`;
 * - readers of a shared lock and holders of a semaphore hold it as a ZSET: member = token,
 *   score = its expiry in server ms (`TIME`), plus one marker member with score +inf that names
 *   the kind: `#shared` or `#semaphore:<limit>`. The key's TTL is kept at the latest expiry.
 *
 * Tokens never start with `#` (the engine's tokens are base64url), so a token is never taken for
 * the marker; the scripts refuse such a token with an error.
 *
 * Every helper is a template that inlines its Lua where it is used (like `bootMarkerAge()` in
 * redis/scripts/lua.ts), never a Lua `function`: a function definition at the top of a script is a
 * closure created on every call of the script — a measured cost on the mutex's hot path.
 */

/** Statement: `local now` = the server time in ms. */
export const NOW_LUA = `
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)`;

/** Expression: a Lua number as an integer string (no exponent) for scores and PEXPIREAT. */
export function num(x: string): string {
  return `string.format('%.0f', ${x})`;
}

/** Expression: ms until `key` expires, 0 when it has no TTL or does not exist. */
export function pttl(key: string): string {
  return `math.max(redis.call('PTTL', ${key}), 0)`;
}

/**
 * Expression: the latest (`last`) or earliest member expiry of a holder zset, nil when it has no
 * holder (the +inf kind marker is excluded).
 */
export function expiry(key: string, last: boolean): string {
  return last
    ? `tonumber(redis.call('ZREVRANGEBYSCORE', ${key}, '(+inf', '-inf', 'WITHSCORES', 'LIMIT', 0, 1)[2])`
    : `tonumber(redis.call('ZRANGEBYSCORE', ${key}, '-inf', '(+inf', 'WITHSCORES', 'LIMIT', 0, 1)[2])`;
}

/**
 * Statements: the kind held at `key`, in the locals `kind` ('none', 'mutex' for a string,
 * 'shared', 'semaphore', or 'foreign' for anything else, e.g. a zset without our marker),
 * `l` (the semaphore's limit, else 0) and `t` (the Redis type).
 */
export function kindOf(key: string): string {
  return `
  local t = redis.call('TYPE', ${key})['ok']
  local kind, l = 'foreign', 0
  if t == 'none' then kind = 'none'
  elseif t == 'string' then kind = 'mutex'
  elseif t == 'zset' then
    local m = redis.call('ZRANGEBYSCORE', ${key}, '+inf', '+inf', 'LIMIT', 0, 1)[1]
    if m == '#shared' then kind = 'shared'
    elseif m then
      local x = string.match(m, '^#semaphore:(%d+)$')
      if x then kind = 'semaphore'; l = tonumber(x) end
    end
  end`;
}

/**
 * Statements: removes the expired holders of `key` (score <= now); deletes the key when no holder
 * is left, otherwise sets its TTL to the latest expiry. Sets the local `live` to the number of
 * live holders. Needs `now`.
 */
export function prune(key: string): string {
  return `
  redis.call('ZREMRANGEBYSCORE', ${key}, '-inf', ${num('now')})
  local live = redis.call('ZCARD', ${key}) - 1
  if live <= 0 then
    redis.call('DEL', ${key})
    live = 0
  else
    redis.call('PEXPIREAT', ${key}, ${num(expiry(key, true))})
  end`;
}

/** Statements: refuses (error reply) a token that is empty or could be taken for the kind marker. */
export const CHECK_TOKEN_LUA = `
if ARGV[1] == '' or string.sub(ARGV[1], 1, 1) == '#' then
  return redis.error_reply('ERR lock token must be non-empty and must not start with #')
end`;

/** The error reply of {@link CHECK_TOKEN_LUA}, as the layouts of the scripts that run it say it. */
export const TOKEN_ERROR_REPLY = 'An error reply when the token is empty or starts with `#`.';

/**
 * The boot marker and fencing parts of the other kinds' acquire scripts: the Lua of ACQUIRE_SCRIPT
 * (lib/core/redis/kinds/mutex.ts) without its clock reading, with the same argument positions
 * (ARGV[3] fencing flag — the mutex's also says whether to read the clock —, ARGV[4]
 * marker: '0' not checked, '1' checked, else the marker value known to be old; ARGV[5] n,
 * ARGV[6] fencing key TTL; fencing counters at KEYS[n+1..2n], the marker at KEYS[#KEYS]).
 * `MARKER_LUA` defines `age` (-1 not checked, -2 known old, else the age in ms: bootMarkerAge);
 * `FENCING_LUA` appends the counters to `res`.
 */
export const MARKER_LUA = `
local age = -1
if ARGV[4] ~= '0' then${bootMarkerAge('KEYS[#KEYS]', 'ARGV[4]')}
end
`;

export const FENCING_LUA = FENCE_COUNTERS_LUA;

/**
 * The first six ARGV of every acquire script, as their layouts list them (the positions
 * MARKER_LUA and FENCING_LUA read; redis/kinds/mutex.ts `acquireLayout` builds them).
 */
export const ACQUIRE_ARGV: readonly ScriptSlot[] = [
  { name: 'token' },
  { name: 'ttl (ms)' },
  { name: "fencing flag: '1' fencing on" },
  {
    name:
      "marker: '0' not checked, '1' checked, else the marker value known to be old " +
      '(bootMarkerAge, redis/scripts/lua.ts)',
  },
  { name: 'n: the number of lock keys' },
  { name: "fencing counter ttl (ms): a new counter's TTL" },
];

/** The `age` of the acquire scripts' replies, as their layouts say it. */
export const MARKER_AGE_REPLY =
  "`age`: the boot marker's age in ms (server clock), `-1` not checked, `-2` the known old " +
  'value passed in `ARGV[4]`.';

/**
 * The granted path of a holder-set acquire (semaphore, shared): on each of the `n` lock keys, the
 * kind's marker member (score +inf), this token with its expiry (now + ARGV[2]) as score, and the
 * key's expiry at its latest member. `marker` is a Lua expression.
 */
export function addHolder(marker: string): string {
  return `
local exp = ${num('now + tonumber(ARGV[2])')}
for i = 1, n do
  redis.call('ZADD', KEYS[i], '+inf', ${marker})
  redis.call('ZADD', KEYS[i], exp, ARGV[1])
  redis.call('PEXPIREAT', KEYS[i], ${num(expiry('KEYS[i]', true))})
end`;
}
