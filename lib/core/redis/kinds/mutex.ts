/**
 * The mutex — the plain lock — in one file: its scripts (acquire, extend, extend-with-repair; the
 * release is redis/scripts/release.ts RELEASE_SCRIPT, compare-and-delete, shared with the fair mode), the
 * {@link LockKind} that sends them, and how their replies read.
 */
import { fenceCountersLua } from '../scripts/fencing';
import { KEEP_SCRIPT } from '../scripts/keep';
import { ACQUIRE_ARGV, MARKER_AGE_REPLY } from '../scripts/kind-lua';
import { CLOCKED_REPLY, bootMarkerAge, clockLua, clockedReturn, script } from '../scripts/lua';
import { RELEASE_SCRIPT } from '../scripts/release';
import { writerGrantedLua } from './writer-flag';
import { ACQUIRE_AMONG_KINDS_SCRIPT } from './mutex-among-kinds';
import type {
  AcquireAnswer,
  AcquireInput,
  ExtendAnswer,
  GroupReply,
  LockKind,
  ScriptCall,
} from './kind';
import { ReplyFormatError, announceFlag, decodeKindAcquire, markerAgeOf } from './kind';
import { withFields } from '../../base/fields';

/**
 * Acquire (the plain lock, docs/REDLOCK.md "N masters" step 2): all-or-nothing
 * `SET key token NX PX ttl` over several keys on one master. KEYS (the writer-waiting flags:
 * base/keys.ts `waitKey`, taken down by a retry's grant: redis/kinds/writer-flag.ts), ARGV and
 * reply: the layout below (listed in docs/scripts.md; {@link acquireLayout} builds the call).
 * On `{-3, age}` (a key holds something else than a string: another kind of lock, or something
 * foreign) nothing is written, and the store asks again with redis/kinds/mutex-among-kinds.ts
 * ACQUIRE_AMONG_KINDS_SCRIPT, which decides among the kinds.
 * `age` is how long ago (ms, server clock) this master's boot marker was born, -1 when not
 * checked, -2 when the marker still holds the known old value passed in ARGV[4]. A missing
 * marker means the data set is younger than any lock we may have taken: the marker is born now,
 * so the master reports age 0 and stays in quarantine (see lib/core/redis/masters/node.ts). The keys
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
local n = tonumber(ARGV[5])${clockLua("ARGV[3] == '2' or ARGV[3] == '3'")}
local age = -1
if ARGV[4] ~= '0' then${bootMarkerAge('KEYS[#KEYS]', 'ARGV[4]', 'clock')}
end
local held = nil
if n == 1 then
  if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then held = 1 end
end
for i = 1, n do
  if n > 1 or held then
    local t = redis.call('TYPE', KEYS[i])['ok']
    if t ~= 'string' and t ~= 'none' then ${clockedReturn('{-3, age}')} end
    if t == 'string' then held = held or i end
  end
end
if held then
  ${clockedReturn("{0, age, redis.call('PTTL', KEYS[held]), redis.call('GET', KEYS[held])}")}
end
if n > 1 then
  for i = 1, n do
    redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
  end
end
if ARGV[7] == '1' then${writerGrantedLua('true', "ARGV[3] == '1' or ARGV[3] == '3'")}
end
local res = {1, age}
${fenceCountersLua("ARGV[3] == '1' or ARGV[3] == '3'", 'clock')}
${clockedReturn('res')}
`,
  {
    keys: [
      { name: 'lock keys', count: 'n' },
      { name: 'fencing counters', count: 'n', when: "ARGV[3] == '1' or ARGV[3] == '3'" },
      { name: 'writer-waiting flags', count: 'n', when: "ARGV[7] == '1'" },
      { name: 'boot marker', last: true, when: "ARGV[4] ~= '0'" },
    ],
    argv: [
      ACQUIRE_ARGV[0],
      ACQUIRE_ARGV[1],
      {
        name:
          "flags: '0' none, '1' fencing, '2' the clock (the master's TIME comes with the " +
          "reply: redis/masters/clock-watch.ts), '3' both",
      },
      ...ACQUIRE_ARGV.slice(3),
      {
        name: "clear: '1' a retry, whose grant takes the writer-waiting flags down",
        when: 'a retry',
      },
    ],
    reply:
      '`{1, age, ...counters}` granted (one fencing counter per key when fencing is on); ' +
      "`{0, age, pttl, holder}` a plain lock holds a key (the first held key's ttl and token); " +
      '`{-3, age}` a key holds another type (nothing written). ' +
      MARKER_AGE_REPLY +
      ' ' +
      CLOCKED_REPLY,
  },
);

/**
 * Extend: all-or-nothing compare-and-pexpire. Never re-creates a missing key (used when the
 * `repairOnExtend` setting is off; see EXTEND_REPAIR_SCRIPT otherwise). KEYS, ARGV, reply: the
 * layout below (docs/scripts.md); 0 also for a key of another kind (GET through `redis.pcall`, as
 * in RELEASE_SCRIPT).
 */
export const EXTEND_SCRIPT = script(
  'extend',
  `${clockLua("ARGV[3] == '1'")}
for i = 1, #KEYS do
  if redis.pcall('GET', KEYS[i]) ~= ARGV[1] then
    ${clockedReturn('0')}
  end
end
for i = 1, #KEYS do
  redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
${clockedReturn('1')}
`,
  {
    keys: [{ name: 'lock keys', count: 'rest' }],
    argv: [
      { name: 'token' },
      { name: 'ttl (ms)' },
      { name: "clock: '1' the master's TIME comes with the reply", when: 'the clock check is on' },
    ],
    reply:
      '`1` every key was ours and got the new TTL; else `0`, nothing changed. ' + CLOCKED_REPLY,
  },
);

/**
 * Extend with repair (the `repairOnExtend` setting; safety argument in redis/repair.ts): for each key,
 * compare-and-pexpire when it holds our token, `SET NX PX` with our token when it is missing.
 * All-or-nothing against other holders: when any key holds another token, nothing is changed.
 * Fencing counters are not touched: a repair puts back the same token, it is not a new holder.
 *
 * KEYS, ARGV, reply: the layout below (docs/scripts.md). `age` is the boot marker's age as in the
 * acquire script (a missing marker is born now, so a master that lost its data set is in
 * quarantine). A key of another kind (a zset of readers or semaphore holders) is another
 * holder's: {0, age}, never an error.
 */
export const EXTEND_REPAIR_SCRIPT = script(
  'extend-repair',
  `
local n = tonumber(ARGV[4])${clockLua("ARGV[5] == '1'")}
local age = -1
if ARGV[3] ~= '0' then${bootMarkerAge('KEYS[n + 1]', 'ARGV[3]', 'clock')}
end
local missing = false
for i = 1, n do
  local v = redis.pcall('GET', KEYS[i])
  if v == false then
    missing = true
  elseif v ~= ARGV[1] then
    ${clockedReturn('{0, age}')}
  end
end
for i = 1, n do
  if not redis.call('SET', KEYS[i], ARGV[1], 'NX', 'PX', ARGV[2]) then
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
  end
end
if missing then
  ${clockedReturn('{2, age}')}
end
${clockedReturn('{1, age}')}
`,
  {
    keys: [
      { name: 'lock keys', count: 'n' },
      { name: 'boot marker', when: "ARGV[3] ~= '0'" },
    ],
    argv: [
      { name: 'token' },
      { name: 'ttl (ms)' },
      { name: "marker: as acquire's ARGV[4]" },
      { name: 'n: the number of lock keys' },
      { name: "clock: '1' the master's TIME comes with the reply", when: 'the clock check is on' },
    ],
    reply:
      '`{status, age}`: status `1` every key was ours (kept), `2` at least one missing key was ' +
      'put back and the others were ours (repaired), `0` some key holds another token ' +
      '(untouched). ' +
      MARKER_AGE_REPLY +
      ' ' +
      CLOCKED_REPLY,
  },
);

/**
 * The mutex: one holder at a time, one string key per resource (`SET key token NX PX ttl`).
 *
 * Quorum: the configured one, a majority by default. Proof: two holders at once would each have
 * been granted by a majority of the N masters; two majorities share at least one master, and one
 * master never holds two tokens under one key within the key's ttl (docs/REDLOCK.md, "Safety
 * argument, in short").
 */
export const MUTEX: LockKind = {
  name: 'mutex',
  limit: undefined,
  repairs: true,

  quorum: (_masters, configured) => configured,

  acquire(input: AcquireInput): ScriptCall {
    // The writer-waiting flags go along only when this plain lock will retry (waitTtl > 0):
    // KEYS[w0 + i] in the acquire scripts.
    const waitKeys = input.waitTtl ? input.waitKeys : undefined;
    // The flags go to the plain script only for a retry, whose grant takes them down.
    const clear = waitKeys && input.clearFlags ? waitKeys : undefined;
    const { keys, args } = acquireLayout(input, clear, []);
    if (clear) args.push('1');
    // The clock check: the master's TIME comes with the reply (redis/masters/clock-watch.ts).
    if (input.clock) args[2] = input.fenceKeys ? '3' : '2';
    const birthArg = input.marker ? 3 : undefined;
    // `{-3, age}`: a key holds something else than a plain lock; asked again among the kinds.
    const followUp = (reply: unknown, sent: ScriptCall): ScriptCall | undefined =>
      Array.isArray(reply) && reply[0] === -3 ? amongKinds(input, waitKeys, sent) : undefined;
    return { script: ACQUIRE_SCRIPT, keys, args, birthArg, followUp, clocked: input.clock };
  },

  readAcquire(groups: readonly GroupReply[], resources: readonly string[]): AcquireAnswer {
    if (groups.length === 1 && groups[0].resources === resources) {
      // The hot path: a standalone master, one reply for every resource.
      const v = checked(groups[0].value);
      const age = markerAgeOf(v[1]);
      if (v[0] === -1) return mismatchAnswer(v, age);
      if (v[0] === 0) {
        const ttl = typeof v[2] === 'number' && v[2] >= 0 ? v[2] : undefined;
        const holder = typeof v[3] === 'string' ? v[3] : undefined;
        return { granted: false, markerAge: age, holderTtl: ttl, counters: undefined, holder };
      }
      const counters = countersIn(v, resources.length);
      return { granted: true, markerAge: age, holderTtl: undefined, counters };
    }
    let granted = true;
    let markerAge: number | undefined;
    let holderTtl: number | undefined;
    // The plain lock that refused, named only when every refused group names the same one
    // (undefined: no group refused; null: not one plain lock).
    let holder: string | null | undefined;
    let mismatch: AcquireAnswer['mismatch'];
    const counted = new Map<string, number>();
    for (const group of groups) {
      const v = checked(group.value);
      const age = markerAgeOf(v[1]);
      if (age !== undefined && (markerAge === undefined || age < markerAge)) markerAge = age;
      if (v[0] === -1) {
        mismatch ??= mismatchAnswer(v, undefined).mismatch;
        granted = false;
        holder = null;
      } else if (v[0] === 0) {
        if (granted && typeof v[2] === 'number' && v[2] >= 0) holderTtl = v[2];
        granted = false;
        const h = typeof v[3] === 'string' ? v[3] : null;
        holder = holder === undefined || holder === h ? h : null;
      } else {
        if (v.length === group.resources.length + 2) {
          group.resources.forEach((r, i) => counted.set(r, Number(v[2 + i])));
        }
      }
    }
    let counters: number[] | undefined;
    if (granted && counted.size > 0) {
      counters = resources.map((r) => counted.get(r) ?? NaN);
      if (!counters.every(Number.isFinite)) counters = undefined;
    }
    const answer = {
      granted,
      markerAge,
      holderTtl: granted ? undefined : holderTtl,
      counters,
    };
    if (mismatch) return withFields(answer, { mismatch });
    return typeof holder === 'string' ? withFields(answer, { holder }) : answer;
  },

  extend(token, ttl, keys, repair, clock): ScriptCall {
    if (!repair) {
      const args = clock ? [token, String(ttl), '1'] : [token, String(ttl)];
      return { script: EXTEND_SCRIPT, keys, args, clocked: clock };
    }
    const { marker } = repair;
    const args = [
      token,
      String(ttl),
      marker ? (repair.markerBirth ?? '1') : '0',
      String(keys.length),
    ];
    if (clock) args.push('1');
    return {
      script: EXTEND_REPAIR_SCRIPT,
      keys: marker ? [...keys, marker] : keys,
      args,
      clocked: clock,
    };
  },

  readExtend(groups: readonly GroupReply[], repair: boolean): ExtendAnswer {
    if (!repair) {
      const kept = groups.every((g) => g.value === 1);
      return { status: kept ? 'kept' : 'held', markerAge: undefined };
    }
    let markerAge: number | undefined;
    let status: ExtendAnswer['status'] = 'kept';
    for (const { value: v } of groups) {
      if (!Array.isArray(v)) throw new ReplyFormatError('extend-repair', v);
      const code = Number(v[0]);
      const age = typeof v[1] === 'number' ? markerAgeOf(v[1]) : undefined;
      if (age !== undefined && (markerAge === undefined || age < markerAge)) markerAge = age;
      if (code !== 1 && code !== 2) status = 'held';
      else if (code === 2 && status === 'kept') status = 'repaired';
    }
    return { status, markerAge };
  },

  release(token, keys, announce, keepFor): ScriptCall {
    // lockAtLeastFor (redis/scripts/keep.ts): compare-and-pexpire to the remainder, no announcement.
    if (keepFor !== undefined && keepFor > 0) {
      return { script: KEEP_SCRIPT, keys, args: [token, String(keepFor)] };
    }
    return { script: RELEASE_SCRIPT, keys, args: [token, announceFlag(announce)] };
  },

  readRelease(groups: readonly GroupReply[]): boolean {
    return !groups.every((g) => g.value === 0);
  },
};

/**
 * The keys and first six arguments of every kind's acquire script: lock keys, fencing counters,
 * the writer-waiting flags, then `more` keys (the fair script's), the boot marker last; token,
 * ttl, fencing flag, marker (the value known to be old when there is one, compared without a
 * clock read: redis/scripts/kind-lua.ts), n, the counters' ttl.
 */
export function acquireLayout(
  input: AcquireInput,
  waitKeys: readonly string[] | undefined,
  more: readonly string[],
): { keys: readonly string[]; args: string[] } {
  const { keys, fenceKeys, marker } = input;
  let all: readonly string[] = keys;
  if (fenceKeys || marker || waitKeys) {
    const list = fenceKeys ? [...keys, ...fenceKeys] : [...keys];
    if (waitKeys) list.push(...waitKeys, ...more);
    if (marker) list.push(marker);
    all = list;
  }
  const args = [
    input.token,
    String(input.ttl),
    fenceKeys ? '1' : '0',
    marker ? (input.markerBirth ?? '1') : '0',
    String(keys.length),
    String(input.fenceTtl),
  ];
  return { keys: all, args };
}

/**
 * The call of ACQUIRE_AMONG_KINDS_SCRIPT (mutex-among-kinds.ts) after `sent` met another kind:
 * the plain layout, with the writer-waiting flags when this plain lock will retry, and the boot
 * marker argument `sent` had on that master (the marker value it is known to hold, if any: a
 * full check would make the engine forget it, redis/masters/node.ts `knownBirth`).
 */
function amongKinds(
  input: AcquireInput,
  waitKeys: readonly string[] | undefined,
  sent: ScriptCall,
): ScriptCall {
  const { keys, args } = acquireLayout(input, waitKeys, []);
  args[3] = sent.args[3];
  if (waitKeys) args.push(String(input.waitTtl), input.clearFlags ? '1' : '0');
  return { script: ACQUIRE_AMONG_KINDS_SCRIPT, keys, args };
}

/**
 * The fencing counters of a granted acquire reply `{1, age, counter per resource}` (`n`
 * resources), as numbers; `undefined` when the reply has none (fencing off) or one is not a
 * number.
 */
function countersIn(v: readonly unknown[], n: number): number[] | undefined {
  if (v.length !== n + 2) return undefined;
  const counters = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    const c = Number(v[2 + i]);
    if (!Number.isFinite(c)) return undefined;
    counters[i] = c;
  }
  return counters;
}

/**
 * An acquire reply `{1|0|-1, age, ...}`, or a {@link ReplyFormatError}. `{-3, age}` (another type
 * at a key, when the call among the kinds was not sent: redis/masters/dispatch.ts) reads as a refusal
 * that names no holder and no ttl.
 */
function checked(v: unknown): [-1 | 0 | 1, number, ...unknown[]] {
  if (!Array.isArray(v) || typeof v[1] !== 'number') throw new ReplyFormatError('acquire', v);
  if (v[0] === -3 && v.length === 2) return [0, v[1]];
  if (v[0] !== 0 && v[0] !== 1 && v[0] !== -1) throw new ReplyFormatError('acquire', v);
  return v as [-1 | 0 | 1, number, ...unknown[]];
}

/** The answer to a `{-1, age, keyTtl, kind, limit}` reply (decoded completely, or an error). */
function mismatchAnswer(v: unknown[], age: number | undefined): AcquireAnswer {
  const d = decodeKindAcquire(v, 0);
  if (d.status !== 'mismatch') throw new ReplyFormatError('acquire', v);
  return {
    granted: false,
    markerAge: age,
    holderTtl: d.holderTtl,
    counters: undefined,
    mismatch: d.found,
  };
}
