/**
 * A plain lock (the mutex) meets another kind of lock: the acquire that decides it
 * (docs/lock-kinds.md). The plain acquire (redis/kinds/mutex.ts ACQUIRE_SCRIPT) knows only strings:
 * a key of another type makes it answer `{-3, age}` and write nothing, and the store sends
 * {@link ACQUIRE_AMONG_KINDS_SCRIPT} to that master right away (redis/kinds/mutex.ts, the call's
 * `followUp`). Both run whole on the master, so the second decides from what it finds then.
 */
import { FENCE_COUNTERS_LUA } from '../scripts/fencing';
import { script } from '../scripts/lua';
import {
  ACQUIRE_ARGV,
  MARKER_AGE_REPLY,
  MARKER_LUA,
  NOW_LUA,
  kindOf,
  prune,
  pttl,
} from '../scripts/kind-lua';
import { writerGrantedLua } from './writer-flag';

/**
 * Lua, the refused path of {@link ACQUIRE_AMONG_KINDS_SCRIPT} and of the fair acquire (some key
 * exists; the locals `n` and `age` of those scripts), the only place where the mutex looks at the
 * other kinds (docs/lock-kinds.md): a semaphore or a foreign type at any key is a kind mismatch,
 * `{-1, age, pttl, kind, limit}`, and nothing is written. Shared readers' expired members are
 * pruned (a reader set without a live reader is gone, so it refuses nothing); on each key still
 * held by readers the writer-waiting flag (KEYS[w0 + i], present when ARGV[7] > 0) is raised until
 * the readers' key expires plus ARGV[7] ms (one retry interval: the waiting writer sleeps until the
 * readers expire or one leaves, policy/acquire.ts, and finds the flag still up when it comes back)
 * — created with this token, or only lengthened when another writer's flag is there — and the reply
 * is `{0, age, pttl, holder}` of the first held key (`holder`: its token when a plain lock holds
 * it; the waiter tells one holder with a quorum from split keys). When no key refuses any more, the
 * script goes on to set them all (the granted path). `pollMarks` (the fair acquire's,
 * fair/acquire-script.ts): Lua run after the flags, where the local `writers` lists the keys held
 * by a plain lock; '' for none.
 */
export function refusedLua(pollMarks: string): string {
  const fair = pollMarks !== '';
  return `
local kinds = {}
for i = 1, n do${kindOf('KEYS[i]')}
  if kind == 'semaphore' or kind == 'foreign' then
    if kind == 'foreign' then kind = 'foreign:' .. t end
    return {-1, age, ${pttl('KEYS[i]')}, kind, l}
  end
  kinds[i] = kind
end${NOW_LUA}
local readers = {}${
    fair
      ? `
local writers = {}`
      : ''
  }
local refused = nil
local holder = nil
for i = 1, n do
  if kinds[i] == 'mutex' then${
    fair
      ? `
    writers[#writers + 1] = i`
      : ''
  }
    if not refused then
      refused = redis.call('PTTL', KEYS[i])
      holder = redis.call('GET', KEYS[i])
    end
  elseif kinds[i] == 'shared' then${prune('KEYS[i]')}
    if live > 0 then
      refused = refused or redis.call('PTTL', KEYS[i])
      readers[#readers + 1] = i
    end
  end
end
if refused then
  local waitTtl = tonumber(ARGV[7]) or 0
  if waitTtl > 0 then
    local w0 = n
    if ARGV[3] == '1' then w0 = 2 * n end
    for _, i in ipairs(readers) do
      local w = KEYS[w0 + i]
      -- The writer sleeps until these readers expire (or one leaves): the flag outlives them by
      -- one retry interval, so it is still up when the writer comes back.
      local fttl = waitTtl + math.max(0, redis.call('PTTL', KEYS[i]))
      if not redis.call('SET', w, ARGV[1], 'NX', 'PX', fttl) then
        if redis.call('PTTL', w) < fttl then redis.call('PEXPIRE', w, fttl) end
      end
    end
${pollMarks}  end
  if holder then return {0, age, refused, holder} end
  return {0, age, refused}
end`;
}

/**
 * Acquire of a plain lock where some key may hold another kind: all-or-nothing
 * `SET key token NX PX ttl` over the keys on one master, with the kinds refusal
 * ({@link refusedLua}).
 *
 * KEYS (the writer-waiting flags: base/keys.ts `waitKey`), ARGV (`clear` '1': a retry, whose
 * grant takes the flags down where one is up: writer-flag.ts) and reply: the layout below
 * (docs/scripts.md). A plain lock is the writer (the exclusive side) of a shared lock: refused by
 * readers, it raises their writer-waiting flag.
 */
export const ACQUIRE_AMONG_KINDS_SCRIPT = script(
  'acquire-among-kinds',
  `
local n = tonumber(ARGV[5])${MARKER_LUA}local held = false
for i = 1, n do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    held = true
    break
  end
end
if held then${refusedLua('')}
end
if ARGV[8] == '1' then${writerGrantedLua('(tonumber(ARGV[7]) or 0) > 0')}
end
-- No key refuses (any more: readers expired): the keys are set.
for i = 1, n do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
local res = {1, age}
${FENCE_COUNTERS_LUA}
return res
`,
  {
    keys: [
      { name: 'lock keys', count: 'n' },
      { name: 'fencing counters', count: 'n', when: "ARGV[3] == '1'" },
      { name: 'writer-waiting flags', count: 'n', when: 'ARGV[7] > 0' },
      { name: 'boot marker', last: true, when: "ARGV[4] ~= '0'" },
    ],
    argv: ACQUIRE_ARGV.concat([
      {
        name: "waitTtl (ms): how long a raised writer-waiting flag outlives the readers' key",
        when: 'a retrying lock',
      },
      {
        name: "clear: '1' a retry, whose grant takes the writer-waiting flags down",
        when: 'a retrying lock',
      },
    ]),
    reply:
      '`{1, age, ...counters}` granted (one fencing counter per key when fencing is on); ' +
      "`{0, age, pttl[, holder]}` held (the first held key's ttl, and its token when a plain lock " +
      'holds it); `{-1, age, pttl, kind, limit}` a key holds a semaphore or something foreign ' +
      '(nothing written); never `{-3, …}`. ' +
      MARKER_AGE_REPLY,
  },
);
