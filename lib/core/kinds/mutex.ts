import {
  ACQUIRE_SCRIPT,
  EXTEND_REPAIR_SCRIPT,
  EXTEND_SCRIPT,
  RELEASE_SCRIPT,
} from './mutex-scripts';
import { KEEP_SCRIPT } from '../scripts/keep';
import { ACQUIRE_AMONG_KINDS_SCRIPT } from './mutex-among-kinds';
import type {
  AcquireAnswer,
  AcquireInput,
  ExtendAnswer,
  GroupReply,
  LockKind,
  ScriptCall,
} from './kind';
import { ReplyFormatError, announceFlag } from './kind';
import { decodeKindAcquire, markerAgeOf } from './kind-replies';
import { withFields } from '../fields';

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
    const birthArg = input.marker ? 3 : undefined;
    // `{-3, age}`: a key holds something else than a plain lock; asked again among the kinds.
    const followUp = (reply: unknown, sent: ScriptCall): ScriptCall | undefined =>
      Array.isArray(reply) && reply[0] === -3 ? amongKinds(input, waitKeys, sent) : undefined;
    return { script: ACQUIRE_SCRIPT, keys, args, birthArg, followUp };
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
      let counters: number[] | undefined;
      if (v.length === resources.length + 2) {
        counters = v.slice(2).map(Number);
        if (!counters.every(Number.isFinite)) counters = undefined;
      }
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

  extend(token, ttl, keys, repair): ScriptCall {
    if (!repair) return { script: EXTEND_SCRIPT, keys, args: [token, String(ttl)] };
    const { marker } = repair;
    return {
      script: EXTEND_REPAIR_SCRIPT,
      keys: marker ? [...keys, marker] : keys,
      args: [token, String(ttl), marker ? (repair.markerBirth ?? '1') : '0', String(keys.length)],
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
    // lockAtLeastFor (scripts/keep.ts): compare-and-pexpire to the remainder, no announcement.
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
 * clock read: scripts/kind-lua.ts), n, the counters' ttl.
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
 * full check would make the engine forget it, masters/node.ts `knownBirth`).
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
 * An acquire reply `{1|0|-1, age, ...}`, or a {@link ReplyFormatError}. `{-3, age}` (another type
 * at a key, when the call among the kinds was not sent: masters/dispatch.ts) reads as a refusal
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
