/** Fencing-counter scripts. */
import { script } from './lua';

/**
 * Lua statements: increments the fencing counter at `key` into a new local `v`. A new (or
 * expired, or lost) counter starts from the server time in whole seconds × 10^6 — `clock`, the
 * master's TIME when the script read it already, else read now — with the TTL `ttl` (see
 * ACQUIRE_SCRIPT). Shared by the acquire scripts and the installs (fair/install-scripts.ts).
 */
export function fenceIncrLua(key: string, ttl: string, clock = "redis.call('TIME')"): string {
  return `local v = redis.call('INCR', ${key})
if v == 1 then
  v = tonumber((${clock})[1]) * 1000000 + 1
  redis.call('SET', ${key}, string.format('%.0f', v), 'PX', ${ttl})
end`;
}

/**
 * Lua of an acquire script with fencing: when `on` (a Lua condition) holds, increments the
 * counters at KEYS[n+1..2n] ({@link fenceIncrLua}, TTL ARGV[6]) and appends them to the table
 * `res` — 0 for each instead on a master whose data set is younger than
 * {@link YOUNG_DATA_SET_MS} (the script's local `age`). A counter that starts takes the server
 * time from `clock` (a Lua expression: the script's reading of TIME, or nil), else reads it.
 */
export function fenceCountersLua(on: string, clock?: string): string {
  const time = clock === undefined ? undefined : `${clock} or redis.call('TIME')`;
  return `
if ${on} then
  local young = ${youngDataSetLua('age')}
  for i = 1, n do
    if young then
      res[#res + 1] = 0
    else
      local fk = KEYS[n + i]
      ${fenceIncrLua('fk', 'ARGV[6]', time)}
      res[#res + 1] = v
    end
  end
end
`;
}

/**
 * A data set younger than this (ms, its boot marker's age) starts no fencing counter: the acquire
 * scripts answer 0 for its counters, and the engine counts no token from them
 * (redis/attempt.ts). A master that lost its counters (a restart without its data) would
 * otherwise start them again from the clock second it restarted in — the very second the tokens
 * it handed out before may come from — while its restart quarantine still runs, and vote with
 * them once it ended: a token lower than one handed out before (seen under load in
 * test/core/fencing.spec.ts; test/core/fence-young-master.spec.ts). Started at least a second
 * after the data set's birth, a counter begins in a later clock second than every token handed
 * out before the restart.
 */
export const YOUNG_DATA_SET_MS = 1000;

/**
 * Lua condition: the boot-marker age `age` (a Lua expression, ms; -1 not checked, -2 known old,
 * other negatives a marker born after the server's clock) is that of a data set younger than
 * {@link YOUNG_DATA_SET_MS}, on which no counter starts. The one statement of the rule, for the
 * acquire scripts ({@link fenceCountersLua}) and the fair mode's installs (fair/install-scripts.ts).
 */
export function youngDataSetLua(age: string): string {
  return `${age} >= 0 and ${age} < ${YOUNG_DATA_SET_MS}`;
}

/** {@link fenceCountersLua} when ARGV[3] == '1': shared by the acquire scripts of the other kinds. */
export const FENCE_COUNTERS_LUA = fenceCountersLua("ARGV[3] == '1'");

/**
 * Raise fencing counters to at least the given values (set-if-greater), refreshing their TTL.
 * KEYS, ARGV, reply: the layout below (docs/scripts.md).
 */
export const FENCE_RAISE_SCRIPT = script(
  'fence-raise',
  `
for i = 1, #KEYS do
  local v = tonumber(ARGV[i + 1])
  local cur = tonumber(redis.call('GET', KEYS[i]))
  if (not cur) or cur < v then
    redis.call('SET', KEYS[i], ARGV[i + 1], 'PX', ARGV[1])
  end
end
return 1
`,
  {
    keys: [{ name: 'fencing counters', count: 'rest' }],
    argv: [
      { name: "counter ttl (ms): the counters' new TTL" },
      { name: 'values: one per counter, in the order of KEYS', count: 'rest' },
    ],
    reply: '`1`',
  },
);

/**
 * The write of {@link fencedWrite} (lib/core/redis/fenced-write.ts): store a value only under a newer fencing
 * token than the last accepted one. KEYS, ARGV, reply: the layout below (docs/scripts.md).
 */
export const FENCED_WRITE_SCRIPT = script(
  'fenced-write',
  `
local cur = tonumber(redis.call('HGET', KEYS[1], 'fencingToken'))
if cur and cur >= tonumber(ARGV[1]) then
  return 0
end
redis.call('HSET', KEYS[1], 'fencingToken', ARGV[1], 'value', ARGV[2])
return 1
`,
  {
    keys: [{ name: 'the hash (fields `fencingToken`, `value`)' }],
    argv: [{ name: 'fencing token' }, { name: 'value' }],
    reply: '`1` written; `0` refused: the hash holds an equal or newer fencing token',
  },
);
