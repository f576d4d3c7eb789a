/** Boot-marker scripts of the restart quarantine (see lib/core/redis/masters/node.ts). */
import { script } from './lua';

/**
 * Seed the boot marker: its birth can never be earlier than the server process's start
 * (server time − uptime). This catches a master restarted from an old RDB snapshot, whose
 * restored marker would otherwise claim an old birth. A missing marker is dated now, not from
 * the process's start: the data set may have been flushed a moment ago (its locks lost then),
 * and a flush leaves no trace of when — dated from the start, a master up longer than the
 * quarantine was trusted at once when an engine's check was the first to find it flushed. A
 * server that never held a marker is quarantined once, from its first check.
 *
 * Done once per server process: KEYS[2] records the `run_id` (from INFO) of the process whose
 * start is already accounted for, and a check of the same process changes nothing. The uptime is
 * known to the second only, so recomputing it on every connect could move the birth forward by
 * up to a second and push a master that just left quarantine back into it. A restored
 * snapshot brings back an old `run_id`, a flushed master has none: both are seeded again.
 *
 * KEYS, ARGV, reply: the layout below (docs/scripts.md).
 */
export const MARKER_SEED_SCRIPT = script(
  'marker-seed',
  `
local t = redis.call('TIME')
local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local birth = tonumber(redis.call('GET', KEYS[1]))
if birth and ARGV[2] ~= '' and redis.call('GET', KEYS[2]) == ARGV[2] then
  return {nowMs - birth, 0, redis.call('GET', KEYS[1])}
end
local cause = 2
local floor = nowMs - tonumber(ARGV[1])
if not birth then
  cause = 1
  floor = nowMs
end
if (not birth) or birth < floor then
  birth = floor
  redis.call('SET', KEYS[1], string.format('%.0f', birth))
end
if ARGV[2] ~= '' then
  redis.call('SET', KEYS[2], ARGV[2])
end
return {nowMs - birth, cause, redis.call('GET', KEYS[1])}
`,
  {
    keys: [{ name: 'boot marker' }, { name: 'run id of the seeding process' }],
    argv: [{ name: 'uptime (ms)' }, { name: "run id (INFO's `run_id`; '' unknown)" }],
    reply:
      "`{age, cause, marker}`: the marker's age in ms (server clock); cause `0` the same process " +
      'as at the last seeding (untouched), `1` there was no marker (new data set), `2` another ' +
      "process; the marker's stored value (MasterNode.knownBirth compares it)",
  },
);

/**
 * Age of the boot marker in ms (server clock), or -1 when it is missing. Read-only: used by
 * health checks. KEYS, ARGV, reply: the layout below (docs/scripts.md).
 */
export const MARKER_AGE_SCRIPT = script(
  'marker-age',
  `
local birth = tonumber(redis.call('GET', KEYS[1]))
if not birth then
  return -1
end
local t = redis.call('TIME')
return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - birth
`,
  {
    keys: [{ name: 'boot marker' }],
    argv: [],
    reply: "the marker's age in ms (server clock); `-1` when it is missing",
  },
);

/**
 * The boot marker's age in ms (server clock) and its stored value, or {-1, ''} when it is
 * missing. Read-only: a master re-reads it after its marker moved (MasterNode.markerMoved).
 * KEYS, ARGV, reply: the layout below (docs/scripts.md).
 */
export const MARKER_READ_SCRIPT = script(
  'marker-read',
  `
local raw = redis.call('GET', KEYS[1])
local birth = tonumber(raw)
if not birth then
  return {-1, ''}
end
local t = redis.call('TIME')
return {tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - birth, raw}
`,
  {
    keys: [{ name: 'boot marker' }],
    argv: [],
    reply:
      "`{age, value}`: the marker's age in ms (server clock) and its stored value; `{-1, ''}` when it is missing",
  },
);
