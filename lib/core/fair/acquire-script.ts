/**
 * The fair mode's acquire (`fairness: 'across-processes'`, README.md here): the plain acquire
 * with poll marks, the order of waiting engines, parks and installs, and local take-overs.
 */
import { ACQUIRE_ARGV, MARKER_AGE_REPLY, MARKER_LUA, NOW_LUA } from '../redis/scripts/kind-lua';
import { FENCE_COUNTERS_LUA } from '../redis/scripts/fencing';
import { ENGINE_ID_LENGTH } from '../base/token';
import { script } from '../redis/scripts/lua';
import { writerGrantedLua } from '../redis/kinds/writer-flag';
import { refusedLua } from '../redis/kinds/mutex-among-kinds';
import { ENGINE_OF, HEAD_INSTALL_LUA, parkLua } from './install-scripts';

/** Lua: 1 when the boot marker is the last key (ARGV[4] ~= '0'), else 0. */
const MARKER_SLOT = `(ARGV[4] ~= '0' and 1 or 0)`;

/** Lua, the fair refused path's part: poll marks, the order and the park (redis/kinds/mutex-among-kinds.ts `refusedLua`). */
const POLL_MARKS_LUA = `
    -- Poll marks (KEYS[w0 + n + i], when given): this plain lock will be back within waitTtl
    -- ms for a key that a plain lock of another engine holds (the engine id starts each token).
    if #KEYS >= w0 + 2 * n + ${MARKER_SLOT} then
      local me = ${ENGINE_OF('ARGV[1]')}
      for _, i in ipairs(writers) do
        local h = redis.call('GET', KEYS[i])
        if h and ${ENGINE_OF('h')} ~= me then
          redis.call('SET', KEYS[w0 + n + i], me, 'PX', waitTtl)
          if q then
            -- Ordered yields: this engine waits, since ARGV[10] (kept when already there), as
            -- long as the holder may hold plus a retry interval.
            redis.call('ZADD', q, 'NX', ARGV[10], me)
            local keep = refused + waitTtl + 1000
            if redis.call('PTTL', q) < keep then redis.call('PEXPIRE', q, keep) end
            if pk then
              -- Hand-over across processes: this engine's next token (ARGV[11]), installed by
              -- a yield that names this engine (RELEASE_SCRIPT) until ARGV[12] ms from now.
              ${parkLua('pk', 'ARGV[11]', 'ARGV[2]', 'ARGV[12]', 'keep')}
            end
          end
        end
      end
    end`;

/**
 * Acquire with the hand-over across processes (`fairness: 'across-processes'`;
 * lib/core/fair/README.md): {@link ACQUIRE_SCRIPT} with poll marks, the order of
 * waiting engines, parks and installs, and local take-overs.
 *
 * Acquire: all-or-nothing `SET key token NX PX ttl` over several keys on one master.
 *
 * KEYS, ARGV, reply: the layout below (docs/scripts.md; fair/fair-mutex.ts `fairAcquire` builds
 * it). The keys: the writer-waiting flags (base/keys.ts `waitKey`), poll marks (fair/fair-keys.ts
 * `pollKey`), the order (`orderKey`: ordered yields, see RELEASE_SCRIPT) and the park
 * (`parkKey`). The park: a refusal by another engine's plain lock parks this engine's next
 * token for the hand-over across processes, installable for `park life` ms
 * (lib/core/fair/README.md); the alive channels' prefix, '' on a Cluster: see RELEASE_SCRIPT.
 *
 * Attempts install for the head (with the park key): a free key, not reserved for this engine,
 * while another engine heads the order with an installable parked token here (and is alive),
 * gets that token installed as a pass would (fair/install-scripts.ts `HEAD_INSTALL_LUA`), announced as
 * `^<this token>:<engine id>:<installed token>:<counter>:<age>`; this attempt is then refused by
 * it (refusedLua). A head gone (its alive channel without subscriber) is taken off the order
 * and the park, and the attempt goes on. A granted engine stays in the order while other
 * engines are in it (its release, a pass, takes it off): see the granted path.
 *
 * `prev` (a local hand-over, fair/handover.ts): the token of this process's holder that is
 * releasing the lock to us. A key holding exactly that token counts as free and is overwritten
 * (token and ttl), so the hand-over is one round with no delete in between and no release
 * announcement; keys of any other holder refuse as usual.
 *
 * Returns {1, age} on success — {2, age} when other engines wait in the order (ordered yields:
 * the key was free and not reserved for another engine, but the order has other members; this
 * engine then stays in it until its pass) —
 * followed by one fencing counter per key when fencing is on and,
 * for a hand-over (`prev` given), by the largest subscriber count of the keys' release channels
 * (PUBSUB NUMSUB: the watchers of every engine, this one's included; fair/fair-queue.ts) and
 * the longest remaining poll mark of another engine on the keys in ms (0: none; fair/streak.ts);
 * `defer` '1' (fair/streak.ts, a yield to pollers): a free key with another engine's poll mark
 * refuses the attempt, `{0, age, pttl of the mark}`; no lock key is written, and a mark of one
 * engine id gets `+` and this engine's id appended (its TTL kept): the hand-overs of the engine
 * deferred to, which read any mark other than exactly their own id, then see this one waiting.
 * This engine's own mark joined by another (`<own id>+<other id>`) refuses too, and becomes the
 * other engine's plain mark: its turn.
 *
 * {0, age, pttl[, holder]} when some key is held (of the first held key); {-1, age, pttl, kind, limit}
 * when a key holds a semaphore or something foreign (refusedLua: the other kinds are looked at
 * only once refused, so the granted path stays one `SET NX`). A plain lock is the writer (the
 * exclusive side) of a shared lock: refused by readers, it raises their writer-waiting flag;
 * refused by another plain lock, it raises the key's poll mark (refusedLua) when given.
 * `age` is how long ago (ms, server clock) this master's boot marker was born, -1 when not checked,
 * -2 when the marker still holds the known old value passed in ARGV[4].
 * A missing marker means the data set is younger than any lock we may have taken: the marker is
 * born now, so the master reports age 0 and stays in quarantine (see lib/core/redis/masters/node.ts).
 * The keys are set even on a master in quarantine: it must know about locks taken from now on.
 *
 * Fencing counters start, when missing, from the server time in whole seconds × 10^6, so they
 * keep growing even after a counter key expired or a master lost its data (as long as fewer
 * than a million locks per second were handed out for one resource). Masters whose clocks agree
 * to the second start a new resource at the same value, so the first lock needs no write-back.
 * The counter's TTL is set when it starts and not refreshed: one that expires restarts from
 * the clock, which is past every token it handed out.
 */
export const FAIR_ACQUIRE_SCRIPT = script(
  'fair-acquire',
  `
local n = tonumber(ARGV[5])${MARKER_LUA}local prev = ARGV[8]
if prev == '' then prev = nil end
if ARGV[9] == '1' then
  -- Deferring (ARGV[9]): a waiter of a process that just let the resource go to another
  -- engine's poller (fair/streak.ts) takes no free key while that engine's poll mark is up
  -- on it (the mark's first engine id): refused, with the mark's remaining time, and the lock
  -- key is not written. The poller takes it; the mark gets this engine's id appended (same
  -- TTL), so that the poller's hand-overs see this engine waiting before it is refused by them.
  -- This engine's own mark that another engine joined ('<me>+<other>': it deferred to us, and
  -- we took the key since) is that engine's turn now: the mark becomes its plain id (same TTL)
  -- and this attempt is refused the same way. (Its first id would let us re-take the key until
  -- that engine's next poll; its plain id, unlike a swapped join, cannot make two deferring
  -- engines hand the mark back and forth.)
  local p0 = n
  if ARGV[3] == '1' then p0 = 2 * n end
  p0 = p0 + n
  if #KEYS >= p0 + n + ${MARKER_SLOT} then
    local me = ${ENGINE_OF('ARGV[1]')}
    for i = 1, n do
      local mark = redis.call('GET', KEYS[p0 + i])
      local joined = mark and string.len(mark) > ${ENGINE_ID_LENGTH}
      if mark and (joined or ${ENGINE_OF('mark')} ~= me) and redis.call('EXISTS', KEYS[i]) == 0 then
        -- (PTTL, SET PX rather than SET KEEPTTL: that needs Redis 6.)
        local left = redis.call('PTTL', KEYS[p0 + i])
        if left > 0 and ${ENGINE_OF('mark')} == me then
          redis.call('SET', KEYS[p0 + i], string.sub(mark, ${ENGINE_ID_LENGTH} + 2), 'PX', left)
        elseif left > 0 and not joined then
          redis.call('SET', KEYS[p0 + i], mark .. '+' .. me, 'PX', left)
        end
        return {0, age, left}
      end
    end
  end
end
-- Ordered yields (ARGV[10]: when this engine began to wait, wall ms; the order key after the
-- poll marks; one resource): see the granted path below, and refusedLua.
local q = nil
local pk = nil
if n == 1 and ARGV[10] then
  local o0 = 3 * n
  if ARGV[3] == '1' then o0 = 4 * n end
  if #KEYS >= o0 + 1 + ${MARKER_SLOT} then q = KEYS[o0 + 1] end
  if q and ARGV[11] then pk = KEYS[o0 + 2] end
end
local held = false
local others = false
local set = n > 1
if n == 1 then
  -- A hand-over reads first: the releasing holder's key is overwritten below (GET, SET instead
  -- of a failing SET NX, GET, SET); any other value takes the plain path.
  if prev and redis.pcall('GET', KEYS[1]) == prev then
    set = true
  else
    held = not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
    if q and not held then
      -- Ordered yields: the free key may be reserved by a yield for another engine (the member
      -- of score -1, '<until ms>:<engine id>', RELEASE_SCRIPT): then the SET is undone and the
      -- attempt refused with the reservation's remaining time, its engine entered in the order.
      -- Else a reservation (its own, or expired) is used up, and the head of the order may get
      -- the key (below); else this engine holds.
      -- Read only once the key was free, so a refused attempt pays nothing for it.
      local first = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
      local named = false
      if first[1] then
        local me = ${ENGINE_OF('ARGV[1]')}
        if tonumber(first[2]) < 0 then
          local sep = string.find(first[1], ':', 1, true)${NOW_LUA}
          local left = tonumber(string.sub(first[1], 1, sep - 1)) - now
          if left > 0 and string.sub(first[1], sep + 1) ~= me then
            redis.call('DEL', KEYS[1])
            redis.call('ZADD', q, 'NX', ARGV[10], me)
            return {0, age, left}
          end
          named = left > 0
          redis.call('ZREM', q, first[1])
        end
        if pk and not named then
          ${HEAD_INSTALL_LUA}
        end
      end
      if first[1] and not held then
        local me = ${ENGINE_OF('ARGV[1]')}
        if pk then redis.call('HDEL', pk, me) end
        -- Other engines still wait in the order: the reply says so (2), and this lock's
        -- release will be a pass (fair/fair-queue.ts announceAs), even at a first attempt.
        -- This engine then keeps its place in the order until that pass takes it off
        -- (RELEASE_SCRIPT): this master's vote may not make a grant (too few others agree), and
        -- an engine taken off the order only where it got a vote would be named by the masters
        -- where it was not, and another engine by these — one pass, two engines installed on
        -- too few masters each, the key held by neither (lib/core/fair/README.md,
        -- "One order on every master"). Alone in the order, it leaves it now.
        -- (Not in it yet — this master grants its first attempt, others refused it or will —
        -- it joins it here too, with the wait start it sends everywhere; not when a yield or
        -- a pass named it: that took it off every master.)
        local rest = redis.call('ZCARD', q)
        local mine = redis.call('ZSCORE', q, me)
        if mine then rest = rest - 1 end
        others = rest > 0
        if not others then
          if mine then redis.call('ZREM', q, me) end
        elseif not mine and not named then
          redis.call('ZADD', q, ARGV[10], me)
        end
      end
    end
  end
else
  for i = 1, n do
    if redis.call('EXISTS', KEYS[i]) == 1 and not (prev and redis.pcall('GET', KEYS[i]) == prev) then
      held = true
      break
    end
  end
end
if held then${refusedLua(POLL_MARKS_LUA)}
  set = true -- no key refuses any more (readers expired): the granted path sets them all
end
if not prev then${writerGrantedLua('(tonumber(ARGV[7]) or 0) > 0')}
end
if set then
  for i = 1, n do
    redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
  end
end
local res = {others and 2 or 1, age}
${FENCE_COUNTERS_LUA}
if prev then
  -- A hand-over also reports the release channels' subscriber connections on this master (the
  -- most over its keys): more than the taker's own engine means another engine waits; and the
  -- longest remaining poll mark of its keys (ms, 0 when none): someone polls for them.
  local counts = redis.call('PUBSUB', 'NUMSUB', unpack(KEYS, 1, n))
  local w = 0
  for i = 2, #counts, 2 do
    if counts[i] > w then w = counts[i] end
  end
  res[#res + 1] = w
  local poll = 0
  local p0 = n
  if ARGV[3] == '1' then p0 = 2 * n end
  p0 = p0 + n
  -- (Not read when another engine's watch was counted: it tells the same.)
  if w <= 1 and (tonumber(ARGV[7]) or 0) > 0 and #KEYS >= p0 + n + ${MARKER_SLOT} then
    local me = ${ENGINE_OF('ARGV[1]')}
    for i = 1, n do
      local mark = redis.call('GET', KEYS[p0 + i])
      if mark and mark ~= me then
        local t = redis.call('PTTL', KEYS[p0 + i])
        if t > poll then poll = t end
      end
    end
  end
  res[#res + 1] = poll
end
return res
`,
  {
    keys: [
      { name: 'lock keys', count: 'n' },
      { name: 'fencing counters', count: 'n', when: "ARGV[3] == '1'" },
      { name: 'writer-waiting flags', count: 'n', when: 'ARGV[7] > 0' },
      { name: 'poll marks', count: 'n', when: 'optional', withPrevious: true },
      { name: 'order key', when: 'optional; read when n = 1 and ARGV[10]', withPrevious: true },
      { name: 'park key', when: 'ARGV[11]', withPrevious: true },
      { name: 'boot marker', last: true, when: "ARGV[4] ~= '0'" },
    ],
    argv: ACQUIRE_ARGV.concat([
      {
        name: "waitTtl (ms; '0' none): a retrying lock's flags and poll marks",
        when: 'a retry or a local hand-over',
      },
      {
        name: "prev: the local holder's token handed over ('' none)",
        when: 'a local hand-over, defer or ordered yields',
      },
      { name: "defer: '1' yield to another engine's poll mark", when: 'defer or ordered yields' },
      { name: 'waitSince (wall ms): since when this engine waits', when: 'ordered yields' },
      { name: "park token: this engine's next token", when: 'the park key' },
      { name: 'park life (ms): how long the parked token is installable', when: 'the park key' },
      { name: "alive prefix: the alive channels' ('' on a Cluster)", when: 'the park key' },
    ]),
    reply:
      '`{1, age, ...counters[, watchers, poll]}` granted, `{2, age, …}` granted while other ' +
      'engines wait in the order (one fencing counter per key when fencing is on; with `prev`, ' +
      "the most subscribers of the keys' release channels and the longest remaining poll mark " +
      "of another engine, ms); `{0, age, pttl[, holder]}` refused (the first held key's ttl, and " +
      "its token when a plain lock holds it; or a poll mark's or a reservation's remaining " +
      'time); `{-1, age, pttl, kind, limit}` a key holds a semaphore or something foreign ' +
      '(nothing written). ' +
      MARKER_AGE_REPLY,
  },
);
