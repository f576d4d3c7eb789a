/**
 * Shared (read) locks and their exclusive (write) side on one master. Readers share a holder zset
 * (`#shared` marker); a writer is the plain mutex: a string at the same key. One key cannot be
 * both, so a reader and a writer never hold the same master; both need a majority
 * (quorum-rule.ts). Key layout, reply shapes and the writer-starvation policy: docs/lock-kinds.md.
 *
 * Writer starvation. A writer refused because readers hold the key leaves a "writer waiting"
 * flag (kind-keys.ts `waitKey`, same slot) that lives `waitTtl` ms. While it exists, new readers
 * are refused (readers already in keep extending and leave when done), so the readers drain and
 * a writer gets in. The flag is refreshed by every refused writer attempt and is never shortened;
 * it is not deleted when a writer wins (the engine's tokens change per attempt, so a winner
 * cannot tell its own flag from another waiting writer's): it expires by itself. Writers ignore
 * the flag — it holds back readers, not other writers; writer against writer is ordinary mutex
 * contention. `waitTtl` should cover the writers' retry interval (retryDelay + retryJitter, a few
 * request timeouts), so a writer still retrying keeps its flag alive, and a writer that gave up
 * blocks new readers for at most `waitTtl`.
 */
import type { LuaScript } from '../scripts/lua';
import { HOLDERS_EXTEND_SCRIPT, HOLDERS_RELEASE_SCRIPT, INSPECT_SCRIPT } from './holder-scripts';
import { FENCING_LUA, KIND_LUA, MARKER_LUA, script } from './lua';

/** Lua: index of the i-th writer-waiting flag (after the lock keys and the fencing counters). */
const WAIT_INDEX_LUA = `
local function waitAt(i)
  if ARGV[3] == '1' then return KEYS[2 * n + i] end
  return KEYS[n + i]
end
`;

/**
 * Reader acquire: all-or-nothing over several resources.
 *
 * KEYS[1..n] lock keys, then n fencing counters (when ARGV[3] == '1'), then n writer-waiting
 * flags, then the boot marker (when ARGV[4] == '1') — see `acquireKeys(..., { wait: true })`.
 * ARGV: token, ttl, fencing flag, marker flag, n, fencing key ttl (as ACQUIRE_SCRIPT).
 *
 * Per key (expired readers pruned first):
 * - a writer holds it (a string): {0, age, its pttl};
 * - free or readers only, but a writer is waiting (flag present): {0, age, the flag's pttl};
 * - another kind (a semaphore, a foreign type): {-1, age, pttl, found kind, found limit};
 * - otherwise admissible. When all are, the token joins each key's readers and the reply is
 *   {1, age, ...fencing counters}, as ACQUIRE_SCRIPT.
 */
export const SHARED_ACQUIRE_SCRIPT = script(
  'shared-acquire',
  `${KIND_LUA}
local bad = checkToken(ARGV[1])
if bad then return bad end
local n = tonumber(ARGV[5])
${WAIT_INDEX_LUA}
${MARKER_LUA}
local now = nowMs()
for i = 1, n do
  local kind, l, t = kindOf(KEYS[i])
  if kind == 'mutex' then
    return {0, age, pttl(KEYS[i])}
  elseif kind == 'shared' or kind == 'none' then
    local mine = kind == 'shared' and redis.call('ZSCORE', KEYS[i], ARGV[1])
    if kind == 'shared' then prune(KEYS[i], now) end
    if (not mine) and redis.call('EXISTS', waitAt(i)) == 1 then
      return {0, age, pttl(waitAt(i))}
    end
  else
    if kind == 'foreign' then kind = 'foreign:' .. t end
    return {-1, age, pttl(KEYS[i]), kind, l}
  end
end
local exp = num(now + tonumber(ARGV[2]))
for i = 1, n do
  redis.call('ZADD', KEYS[i], '+inf', '#shared')
  redis.call('ZADD', KEYS[i], exp, ARGV[1])
  redis.call('PEXPIREAT', KEYS[i], num(expiry(KEYS[i], true)))
end
local res = {1, age}
${FENCING_LUA}
return res
`,
);

/**
 * Writer (exclusive) acquire: ACQUIRE_SCRIPT made aware of the other kinds. Meant to replace
 * ACQUIRE_SCRIPT for every plain lock once shared locks exist (any plain lock may be the writer
 * of a resource that others read); for strings and free keys it behaves exactly like it.
 *
 * KEYS as SHARED_ACQUIRE_SCRIPT (lock keys, fencing counters, writer-waiting flags, marker).
 * ARGV: token, ttl, fencing flag, marker flag, n, fencing key ttl, waitTtl (ms; '0' = never
 * leave a writer-waiting flag).
 *
 * First every key's kind is checked: a semaphore or a foreign type anywhere gives
 * {-1, age, pttl, found kind, found limit} and nothing is written. Then per key (expired readers
 * pruned): held by a writer (string) or by live readers → refused. On every key with live readers
 * the writer-waiting flag is raised: created with this token and `waitTtl`, or, when another
 * writer's flag is there, only lengthened to `waitTtl` (its token is kept, it is never
 * shortened). When refused: {0, age, pttl} with the pttl of the first refusing key (for readers:
 * until the last of them expires). Otherwise `SET key token PX ttl` on every key and
 * {1, age, ...fencing counters}, as ACQUIRE_SCRIPT.
 */
export const WRITE_ACQUIRE_SCRIPT = script(
  'write-acquire',
  `${KIND_LUA}
local bad = checkToken(ARGV[1])
if bad then return bad end
local n = tonumber(ARGV[5])
local waitTtl = tonumber(ARGV[7]) or 0
${WAIT_INDEX_LUA}
${MARKER_LUA}
for i = 1, n do
  local kind, l, t = kindOf(KEYS[i])
  if kind ~= 'none' and kind ~= 'mutex' and kind ~= 'shared' then
    if kind == 'foreign' then kind = 'foreign:' .. t end
    return {-1, age, pttl(KEYS[i]), kind, l}
  end
end
local now = nowMs()
local refused = nil
for i = 1, n do
  local kind = kindOf(KEYS[i])
  if kind == 'mutex' then
    refused = refused or pttl(KEYS[i])
  elseif kind == 'shared' and prune(KEYS[i], now) > 0 then
    refused = refused or pttl(KEYS[i])
    if waitTtl > 0 then
      local w = waitAt(i)
      if redis.call('SET', w, ARGV[1], 'NX', 'PX', ARGV[7]) == false then
        if redis.call('PTTL', w) < waitTtl then redis.call('PEXPIRE', w, ARGV[7]) end
      end
    end
  end
end
if refused then
  return {0, age, refused}
end
for i = 1, n do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
local res = {1, age}
${FENCING_LUA}
return res
`,
);

/** Extend a reader (compare-and-pexpire of its membership; see HOLDERS_EXTEND_SCRIPT). */
export const SHARED_EXTEND_SCRIPT = HOLDERS_EXTEND_SCRIPT;
/** Release a reader (its membership only; see HOLDERS_RELEASE_SCRIPT). */
export const SHARED_RELEASE_SCRIPT = HOLDERS_RELEASE_SCRIPT;
/** Inspect any kind (read-only; see INSPECT_SCRIPT); pass the wait key as KEYS[2]. */
export const SHARED_INSPECT_SCRIPT = INSPECT_SCRIPT;

/** The shared lock's scripts (the writer extends and releases with the mutex scripts). */
export const SHARED_SCRIPTS: readonly LuaScript[] = [
  SHARED_ACQUIRE_SCRIPT,
  WRITE_ACQUIRE_SCRIPT,
  HOLDERS_EXTEND_SCRIPT,
  HOLDERS_RELEASE_SCRIPT,
  INSPECT_SCRIPT,
];
