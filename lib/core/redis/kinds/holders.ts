import type { LuaScript } from '../scripts/lua';
import { HOLDERS_EXTEND_SCRIPT, HOLDERS_RELEASE_SCRIPT } from './holder-scripts';
import type {
  AcquireAnswer,
  AcquireInput,
  ExtendAnswer,
  GroupReply,
  LockKind,
  ScriptCall,
} from './kind';
import {
  ReplyFormatError,
  announceFlag,
  decodeKindAcquire,
  decodeKindExtend,
  decodeKindRelease,
  markerAgeOf,
} from './kind';
import { acquireLayout } from './mutex';
import { semaphoreQuorum } from '../../quorum/kind-rules';
import { withFields } from '../../base/fields';
import { SEMAPHORE_ACQUIRE_SCRIPT } from './semaphore-scripts';
import { SHARED_ACQUIRE_SCRIPT } from './shared-scripts';

/**
 * The holder-set kinds — shared (read) locks and counting semaphores — as {@link LockKind}s: a
 * zset of holders per key (docs/lock-kinds.md), extended and released per membership
 * (holder-scripts.ts), never repaired.
 */

/**
 * Shared (read) locks: any number of readers, never together with the writer (a plain lock of
 * the same resource).
 *
 * Quorum: the configured one (a majority by default), the writer's. Proof (lib/core/quorum/kind-rules.ts,
 * `isSafeSharedQuorum`): a reader and a writer each granted by q masters with 2q > N meet on at
 * least one master, where one key cannot be both a reader zset and the writer's string; readers
 * need nothing against each other.
 */
export const SHARED: LockKind = holderKind('shared', undefined, SHARED_ACQUIRE_SCRIPT);

const semaphores = new Map<number, LockKind>();

/**
 * The counting semaphore of `limit` (≥ 1) holders.
 *
 * Quorum: max(configured, floor(N·n/(n+1)) + 1) (lib/core/quorum/kind-rules.ts `semaphoreQuorum`). Proof
 * (pigeonhole): n + 1 holders with q > N·n/(n+1) masters each make (n+1)·q > n·N memberships, so
 * some master would hold n + 1 of them — its script never admits more than n. A plain majority
 * is not enough for n > 1 (the cyclic counter-example in quorum/kind-rules.ts).
 */
export function semaphoreKind(limit: number): LockKind {
  let kind = semaphores.get(limit);
  if (!kind) {
    kind = holderKind('semaphore', limit, SEMAPHORE_ACQUIRE_SCRIPT);
    if (semaphores.size < 1024) semaphores.set(limit, kind);
  }
  return kind;
}

function holderKind(
  name: 'shared' | 'semaphore',
  limit: number | undefined,
  acquireScript: LuaScript,
): LockKind {
  const shared = name === 'shared';
  return {
    name,
    limit,
    repairs: false,

    quorum: (masters, configured) =>
      shared ? configured : Math.max(configured, semaphoreQuorum(masters, limit as number)),

    acquire(input: AcquireInput): ScriptCall {
      // Readers always send the writer-waiting flags (they read them); semaphores none.
      const waitKeys = shared ? (input.waitKeys ?? []) : undefined;
      const { keys, args } = acquireLayout(input, waitKeys, []);
      if (!shared) args.push(String(limit));
      return { script: acquireScript, keys, args, birthArg: input.marker ? 3 : undefined };
    },

    readAcquire(groups: readonly GroupReply[], resources: readonly string[]): AcquireAnswer {
      let granted = true;
      let markerAge: number | undefined;
      let holderTtl: number | undefined;
      let mismatch: AcquireAnswer['mismatch'];
      const counted = new Map<string, number>();
      for (const group of groups) {
        const v = group.value;
        const counters =
          Array.isArray(v) && v[0] === 1 && v.length > 2 ? group.resources.length : 0;
        const d = decodeKindAcquire(v, counters);
        const age = markerAgeOf(d.markerAge);
        if (age !== undefined && (markerAge === undefined || age < markerAge)) markerAge = age;
        if (d.status === 'granted') {
          group.resources.forEach((r, i) => {
            if (i < d.fencing.length) counted.set(r, d.fencing[i]);
          });
          continue;
        }
        if (granted) holderTtl = d.holderTtl;
        granted = false;
        if (d.status === 'mismatch') mismatch ??= d.found;
      }
      let counters: number[] | undefined;
      if (granted && counted.size > 0) {
        counters = resources.map((r) => counted.get(r) ?? NaN);
        if (!counters.every(Number.isFinite)) counters = undefined;
      }
      const answer = { granted, markerAge, holderTtl: granted ? undefined : holderTtl, counters };
      return mismatch ? withFields(answer, { mismatch }) : answer;
    },

    extend(token, ttl, keys): ScriptCall {
      return { script: HOLDERS_EXTEND_SCRIPT, keys, args: [token, String(ttl)] };
    },

    readExtend(groups: readonly GroupReply[], repair: boolean): ExtendAnswer {
      if (repair) throw new ReplyFormatError('holders-extend (no repair for holder sets)', null);
      const kept = groups.every((g) => decodeKindExtend(g.value));
      return { status: kept ? 'kept' : 'held', markerAge: undefined };
    },

    release(token, keys, announce, keepFor): ScriptCall {
      const args = [token, announceFlag(announce)];
      if (keepFor !== undefined && keepFor > 0) args.push(String(keepFor));
      return { script: HOLDERS_RELEASE_SCRIPT, keys, args };
    },

    readRelease(groups: readonly GroupReply[]): boolean {
      return groups.some((g) => decodeKindRelease(g.value, Number.MAX_SAFE_INTEGER) > 0);
    },
  };
}
