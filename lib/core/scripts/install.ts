/**
 * The Lua of the hand-over across processes (design: docs/handover-across-processes.md),
 * inlined into the mutex's scripts (scripts/mutex.ts): parking an engine's next token for a
 * resource, and installing the parked token of the engine a yield names.
 */
import { num } from '../kinds/lua';
import { RESERVED_SEP } from './announce';
import { bootMarkerAge } from './lua';

/**
 * Lua statement: parks token `token` with ttl `ttl` for engine `me` in the hash `hash`,
 * installable until the master's `now` plus `life` ms (`<token> <ttl> <until>`); the hash lives
 * at least `keep` ms. Expressions; `now` and `me` must be in scope.
 */
export function parkLua(
  hash: string,
  token: string,
  ttl: string,
  life: string,
  keep: string,
): string {
  return `redis.call('HSET', ${hash}, me, ${token} .. ' ' .. ${ttl} .. ' ' .. ${num(`now + tonumber(${life})`)})
if redis.call('PTTL', ${hash}) < ${keep} then redis.call('PEXPIRE', ${hash}, ${keep}) end`;
}

/**
 * Lua (RELEASE_SCRIPT, a yield that names engine `nx`, the key `KEYS[i]` just deleted): when the
 * park hash `pk` holds a well-formed token of `nx` that is still installable, the key is set to
 * it with its ttl — as an acquire would — the resource's fencing counter `KEYS[3n + i]` is
 * incremented (ARGV[10] '1'; a new counter starts from the server time like an acquire's, with
 * the TTL ARGV[11]), the boot marker's age is read (ARGV[12] '1'; the marker is the last key),
 * and `inst` becomes the announcement's suffix `:<token>:<counter>:<age>` (counter 0: not
 * counted; age -1: not checked). The parked entry is used up either way. `now`, `clock` (the
 * master's TIME) and `inst` must be in scope.
 */
export const INSTALL_LUA = `
local pv = pk and redis.call('HGET', pk, nx)
if pv then
  redis.call('HDEL', pk, nx)
  local a = string.find(pv, ' ', 1, true)
  local b = a and string.find(pv, ' ', a + 1, true)
  local ittl = b and tonumber(string.sub(pv, a + 1, b - 1))
  local till = b and tonumber(string.sub(pv, b + 1))
  -- (Anything else than what the scripts park, written by someone else, is not used.)
  if till and till >= now and ittl and ittl > 0 and a > 1 then
    local itok = string.sub(pv, 1, a - 1)
    redis.call('SET', KEYS[i], itok, 'PX', ${num('ittl')})
    local f = '0'
    if ARGV[10] == '1' then
      local fk = KEYS[3 * n + i]
      local v = redis.call('INCR', fk)
      if v == 1 then
        v = tonumber(clock[1]) * 1000000 + 1
        redis.call('SET', fk, ${num('v')}, 'PX', ARGV[11])
      end
      f = ${num('v')}
    end
    local age = -1
    if ARGV[12] ~= '0' then${bootMarkerAge('KEYS[#KEYS]')}
    end
    inst = '${RESERVED_SEP}' .. itok .. '${RESERVED_SEP}' .. f .. '${RESERVED_SEP}' .. age
  end
end`;
