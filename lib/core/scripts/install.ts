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
 * Lua: when the park hash `pk` holds a well-formed token of engine `nx` that is still
 * installable, the lock key `key` is set to it with its ttl — as an acquire would — the
 * resource's fencing counter is incremented (when `fence` is given: `on`, a Lua condition;
 * `key`, the counter; a new counter starts from the server time like an acquire's, with the TTL
 * `ttl`), the boot marker's age is taken (`age`: Lua statements that leave it in the local
 * `iage`, -1 when not checked), and `inst` becomes the announcement's suffix
 * `:<token>:<counter>:<age>` (counter 0: not counted). The parked entry is used up either way.
 * `now`, `clock` (the master's TIME) and `inst` must be in scope. Used by a yield or a pass
 * that names `nx` (RELEASE_SCRIPT, INSTALL_LUA) and by an attempt that finds the key free while
 * `nx` heads the order (ACQUIRE_SCRIPT).
 */
export function installLua(
  key: string,
  fence: { on: string; key: string; ttl: string },
  age: string,
): string {
  return `
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
    redis.call('SET', ${key}, itok, 'PX', ${num('ittl')})
    local f = '0'
    if ${fence.on} then
      local fk = ${fence.key}
      local v = redis.call('INCR', fk)
      if v == 1 then
        v = tonumber(clock[1]) * 1000000 + 1
        redis.call('SET', fk, ${num('v')}, 'PX', ${fence.ttl})
      end
      f = ${num('v')}
    end
    local iage = -1${age}
    inst = '${RESERVED_SEP}' .. itok .. '${RESERVED_SEP}' .. f .. '${RESERVED_SEP}' .. iage
  end
end`;
}

/**
 * Lua (for installLua's `age`): when `checked` (a Lua condition), the boot marker's age (the
 * marker is the last key) in `iage`. Always the marker's real age — never an acquire's "known
 * old" answer (-2), which holds for the attempting engine's quarantine, not necessarily for the
 * engine the token is installed for.
 */
export function installAgeLua(checked: string): string {
  return `
    if ${checked} then
      local age = -1${bootMarkerAge('KEYS[#KEYS]')}
      iage = age
    end`;
}

/**
 * Lua (RELEASE_SCRIPT, a yield that names engine `nx`, the key `KEYS[i]` just deleted): the
 * install of `nx`'s parked token (installLua) with the fencing counter `KEYS[3n + i]` (ARGV[10]
 * '1', TTL ARGV[11]) and the boot marker's age (ARGV[12] '1').
 */
export const INSTALL_LUA = installLua(
  'KEYS[i]',
  { on: "ARGV[10] == '1'", key: 'KEYS[3 * n + i]', ttl: 'ARGV[11]' },
  installAgeLua("ARGV[12] ~= '0'"),
);
