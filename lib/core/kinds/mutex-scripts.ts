/** The mutex's scripts: acquire, release, extend, extend-with-repair (one master each). */
import { FENCE_COUNTERS_LUA } from '../scripts/fencing';
import { MARKER_LUA } from '../scripts/kind-lua';
import { bootMarkerAge, script } from '../scripts/lua';
import { writerGrantedLua } from './writer-flag';

/**
 * Acquire (the plain lock, docs/REDLOCK.md "N masters" step 2): all-or-nothing
 * `SET key token NX PX ttl` over several keys on one master.
 *
 * KEYS[1..n]    lock keys
 * KEYS[n+1..2n] fencing counters (only when ARGV[3] == '1')
 * then n writer-waiting flags (only when ARGV[7] == '1'; see keys.ts `waitKey`)
 * KEYS[last]    boot marker (only when ARGV[4] ~= '0')
 * ARGV: token, ttl, fencing flag, marker ('0': not checked, '1': checked, else the marker value
 *       known to be old: see bootMarkerAge in scripts/lua.ts), n, fencing key ttl, [clear] (`clear` '1':
 *       a retry, whose grant takes the writer-waiting flags down where one is up:
 *       kinds/writer-flag.ts)
 *
 * Returns {1, age} on success, followed by one fencing counter per key when fencing is on;
 * {0, age, pttl, holder} when a plain lock holds a key (the first held key's ttl and token);
 * {-3, age} when a key holds something else than a string (another kind of lock, or something
 * foreign) — nothing is written, and the store asks again with
 * kinds/mutex-among-kinds.ts ACQUIRE_AMONG_KINDS_SCRIPT, which decides among the kinds.
 * `age` is how long ago (ms, server clock) this master's boot marker was born, -1 when not
 * checked, -2 when the marker still holds the known old value passed in ARGV[4]. A missing
 * marker means the data set is younger than any lock we may have taken: the marker is born now,
 * so the master reports age 0 and stays in quarantine (see lib/core/masters/node.ts). The keys
 * are set even on a master in quarantine: it must know about locks taken from now on.
 *
 * Fencing counters start, when missing, from the server time in whole seconds × 10^6, so they
 * keep growing even after a counter key expired or a master lost its data (as long as fewer
 * than a million locks per second were handed out for one resource). Masters whose clocks agree
 * to the second start a new resource at the same value, so the first lock needs no write-back.
 * The counter's TTL is set when it starts and not refreshed: one that expires restarts from
 * the clock, which is past every token it handed out.
 */
export const ACQUIRE_SCRIPT = script(
  'acquire',
  `
local n = tonumber(ARGV[5])${MARKER_LUA}local held = nil
if n == 1 then
  if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then held = 1 end
end
for i = 1, n do
  if n > 1 or held then
    local t = redis.call('TYPE', KEYS[i])['ok']
    if t ~= 'string' and t ~= 'none' then return {-3, age} end
    if t == 'string' then held = held or i end
  end
end
if held then
  return {0, age, redis.call('PTTL', KEYS[held]), redis.call('GET', KEYS[held])}
end
if n > 1 then
  for i = 1, n do
    redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
  end
end
if ARGV[7] == '1' then${writerGrantedLua('true')}
end
local res = {1, age}
${FENCE_COUNTERS_LUA}
return res
`,
);

export { RELEASE_SCRIPT } from '../scripts/release';

/**
 * Extend: all-or-nothing compare-and-pexpire. Never re-creates a missing key (used when the
 * `repairOnExtend` setting is off; see EXTEND_REPAIR_SCRIPT otherwise).
 * KEYS: lock keys. ARGV: token, ttl. Returns 1 when every key was ours and got the new TTL;
 * 0 also for a key of another kind (GET through `redis.pcall`, as in RELEASE_SCRIPT).
 */
export const EXTEND_SCRIPT = script(
  'extend',
  `
for i = 1, #KEYS do
  if redis.pcall('GET', KEYS[i]) ~= ARGV[1] then
    return 0
  end
end
for i = 1, #KEYS do
  redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
return 1
`,
);

/**
 * Extend with repair (the `repairOnExtend` setting; safety argument in repair.ts): for each key,
 * compare-and-pexpire when it holds our token, `SET NX PX` with our token when it is missing.
 * All-or-nothing against other holders: when any key holds another token, nothing is changed.
 * Fencing counters are not touched: a repair puts back the same token, it is not a new holder.
 *
 * KEYS[1..n] lock keys, KEYS[n+1] boot marker (only when ARGV[3] ~= '0').
 * ARGV: token, ttl, marker (as ACQUIRE_SCRIPT's ARGV[4]), n.
 * Returns {status, age}: status 1 = every key was ours (kept), 2 = at least one missing key was
 * put back and the others were ours (repaired), 0 = some key holds another token (untouched).
 * `age` is the boot marker's age as in the acquire script (a missing marker is born now, so a
 * master that lost its data set is in quarantine), -1 when not checked, -2 when known old. A key
 * of another kind (a zset of readers or semaphore holders) is another holder's: {0, age}, never
 * an error.
 */
export const EXTEND_REPAIR_SCRIPT = script(
  'extend-repair',
  `
local n = tonumber(ARGV[4])
local age = -1
if ARGV[3] ~= '0' then${bootMarkerAge('KEYS[n + 1]', 'ARGV[3]')}
end
local missing = false
for i = 1, n do
  local v = redis.pcall('GET', KEYS[i])
  if v == false then
    missing = true
  elseif v ~= ARGV[1] then
    return {0, age}
  end
end
for i = 1, n do
  if not redis.call('SET', KEYS[i], ARGV[1], 'NX', 'PX', ARGV[2]) then
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
  end
end
if missing then
  return {2, age}
end
return {1, age}
`,
);
