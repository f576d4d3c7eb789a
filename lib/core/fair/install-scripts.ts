/**
 * The Lua of the hand-over across processes (design: lib/core/fair/README.md), inlined into the
 * fair mode's scripts (acquire-script.ts, release-script.ts): parking an engine's next token for a
 * resource, and installing the parked token of the engine a yield names.
 */
import { NOW_LUA, num } from '../redis/scripts/kind-lua';
import { RESERVED_SEP, YIELD_PREFIX } from './yield-announce';
import { fenceIncrLua, youngDataSetLua } from '../redis/scripts/fencing';
import { bootMarkerAge } from '../redis/scripts/lua';
import { ENGINE_ID_LENGTH } from '../base/token';

/**
 * Lua expression: the engine id that starts the token `token` (base/token.ts), for the fair
 * scripts (acquire-script.ts, release-script.ts).
 */
export const ENGINE_OF = (token: string): string => `string.sub(${token}, 1, ${ENGINE_ID_LENGTH})`;

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
 * `:<token>:<counter>:<age>` (counter 0: not counted — also where the data set is younger than
 * redis/scripts/fencing.ts YOUNG_DATA_SET_MS, which starts no counter, as an acquire would not).
 * The parked entry is used up either way.
 * `now`, `clock` (the master's TIME) and `inst` must be in scope. Used by a yield or a pass
 * that names `nx` (RELEASE_SCRIPT, INSTALL_LUA) and by an attempt that finds the key free while
 * `nx` heads the order (FAIR_ACQUIRE_SCRIPT).
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
    local iage = -1${age}
    local f = '0'
    -- (No counter starts on a data set younger than a second, as in an acquire:
    -- redis/scripts/fencing.ts YOUNG_DATA_SET_MS.)
    if ${fence.on} and not (${youngDataSetLua('iage')}) then
      local fk = ${fence.key}
      ${fenceIncrLua('fk', fence.ttl, 'clock')}
      f = ${num('v')}
    end
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

/**
 * Lua (FAIR_ACQUIRE_SCRIPT's granted path; `q` the order, `pk` the park, `me` this engine, `held`
 * in scope): attempts install for the head. The key is free, but another engine has waited
 * longer (the order's head) and parked a token here that is still installable: it gets the key —
 * installed as a pass would install it (RELEASE_SCRIPT, a SET NX on its behalf: installLua, with
 * the marker's real age), announced as a yield that names it — and `held` is set: the attempt is
 * refused by it (FAIR_ACQUIRE_SCRIPT's refused path: this engine enters the order, parks). An attempt
 * of an engine that has not waited longest no longer takes a vote from the head: with one caller
 * per process, the releasing process's next acquire (and any attempt woken by a clean-up) used to
 * take free keys on a few masters, and the next pass could install only on the others
 * (lib/core/fair/README.md, "Attempts install for the head"). A head whose alive
 * channel (ARGV[13]) has no subscriber here is gone: off the order and the park. Fencing counter
 * KEYS[2] (ARGV[3] '1', TTL ARGV[6]); marker checked when ARGV[4] ~= '0'.
 */
export const HEAD_INSTALL_LUA = `
local nx = redis.call('ZRANGEBYSCORE', q, '0', '+inf', 'LIMIT', 0, 1)[1]
if nx and nx ~= me then
  if ARGV[13] and ARGV[13] ~= '' and redis.call('PUBSUB', 'NUMSUB', ARGV[13] .. nx)[2] == 0 then
    redis.call('ZREM', q, nx)
    redis.call('HDEL', pk, nx)
  else
    local inst = nil${NOW_LUA}
    ${installLua('KEYS[1]', { on: "ARGV[3] == '1'", key: 'KEYS[2]', ttl: 'ARGV[6]' }, installAgeLua("ARGV[4] ~= '0'"))}
    if inst then
      -- (The head keeps its place in the order: the next pass names it on every
      -- master — here too, where its token now holds — and takes it off everywhere.
      -- Taken off here alone, it would be named by the other masters only.)
      redis.call('PUBLISH', KEYS[1], '${YIELD_PREFIX}' .. ARGV[1] .. '${RESERVED_SEP}' .. nx .. inst)
      held = true
    end
  end
end`;
