/**
 * What the fair mode adds to one attempt on the masters (redis/attempt.ts `AttemptParts`):
 * poll marks, the order of ordered yields and the park of the hand-over across processes, a
 * local take-over (README.md here), and what the granting masters said of them.
 */
import type { AcquireAnswer, AcquireInput, GroupReply, LockKind } from '../redis/kinds/kind';
import { orderKey, parkKey, pollKey } from './fair-keys';
import type { AttemptOutcome, Grant } from '../store';
import type { FairAttemptRequest } from './fair-store';
import type { Tally } from '../quorum/round';
import type { AttemptParts } from '../redis/attempt';
import type { FairContext } from './fair-context';
import { withFields } from '../base/fields';
import type { FairAcquireAnswer, FairAcquireInput } from './fair-mutex';
import { aliveArg } from './install-order';

export type { FairContext };

/** The fair mode's parts of each attempt of `store`. */
export function fairAttemptParts(store: FairContext): AttemptParts {
  const prefix = store.settings.keyPrefix;
  // Ordered yields: single-resource plain locks, with release announcements.
  const ordered = store.settings.handoff;
  return {
    input(plain, kind, request, start, wallStart): AcquireInput {
      const req = request as FairAttemptRequest;
      const mutex = kind.name === 'mutex';
      const retries = mutex && plain.waitTtl !== undefined && plain.waitTtl > 0;
      const { resources } = req;
      const orderKeys =
        retries && ordered && resources.length === 1 ? [orderKey(prefix, resources[0])] : undefined;
      const handoverFrom = mutex ? req.handoverFrom : undefined;
      const input: FairAcquireInput = withFields(plain, {
        pollKeys: retries ? resources.map((r) => pollKey(prefix, r)) : undefined,
        handoverFrom,
        defer: req.defer === true,
        orderKeys,
        waitSince: orderKeys ? (req.waitSince ?? wallStart) : undefined,
        // The hand-over across processes (installs.ts): parked only while this engine hears the
        // installs (not for a local take-over, which another engine's lock never refuses).
        park:
          orderKeys && handoverFrom === undefined && store.hears(plain.keys[0])
            ? parkInput(store, resources[0], plain.ttl, start, wallStart)
            : undefined,
      });
      return input;
    },
    group(plain, group): AcquireInput {
      return plain.waitKeys && plain.waitTtl
        ? withFields(plain, { pollKeys: group.map((r) => pollKey(prefix, r)) })
        : plain;
    },
    read(input, kind, resources) {
      if ((input as FairAcquireInput).handoverFrom === undefined) return undefined;
      return (groups: readonly GroupReply[]) => readHandover(kind, groups, resources);
    },
    // A hand-over's releasing holder releases only where the take-over did not land at the end
    // (fair-store.ts `FairGrant.takenOver`), not on every master still pending at the verdict.
    lateVotes: (input) => (input as FairAcquireInput).handoverFrom !== undefined,
    granted(grant, tally, input, request): Grant {
      const req = request as FairAttemptRequest;
      const fair = input as FairAcquireInput;
      if (fair.park) store.installs.retire(fair.park.token); // (installs.ts)
      const othersWait = fair.orderKeys !== undefined && othersWaitIn(tally);
      if (fair.handoverFrom === undefined) return withFields(grant, { othersWait });
      const { watchers, polled } = othersOf(tally);
      return withFields(grant, {
        watchers,
        polled,
        othersWait,
        takenOver: tally.final,
        installedBy: req.installedBy,
      });
    },
    refused(outcome, input): AttemptOutcome {
      const { waitSince } = input as FairAcquireInput;
      return waitSince === undefined || outcome.grant
        ? outcome
        : withFields(outcome, { waitSince });
    },
  };
}

/** The park of an attempt (AcquireInput.park). */
function parkInput(
  store: FairContext,
  resource: string,
  ttl: number,
  start: number,
  wall: number,
): FairAcquireInput['park'] {
  const { token, life } = store.installs.park(resource, ttl, start, wall);
  return { key: parkKey(store.settings.keyPrefix, resource), token, life, alive: aliveArg(store) };
}

/**
 * A hand-over's acquire reply carries two more numbers when granted (FAIR_ACQUIRE_SCRIPT: the release
 * channels' subscriber count, the longest poll mark); they are taken off before the kind reads
 * the rest.
 */
function readHandover(
  kind: LockKind,
  groups: readonly GroupReply[],
  resources: readonly string[],
): AcquireAnswer {
  let watchers = 0;
  let polled = 0;
  const rest = groups.map((g): GroupReply => {
    const v = g.value;
    if (!Array.isArray(v) || (v[0] !== 1 && v[0] !== 2) || v.length < 4) return g;
    const w: unknown = v[v.length - 2];
    const p: unknown = v[v.length - 1];
    watchers = Math.max(watchers, typeof w === 'number' && w >= 0 ? w : Infinity);
    if (typeof p === 'number' && p > 0) polled = Math.max(polled, p);
    return { resources: g.resources, value: v.slice(0, -2) };
  });
  const answer = kind.readAcquire(rest, resources);
  return answer.granted ? withFields(answer, { watchers, polled }) : answer;
}

/**
 * What the granting masters said of a hand-over's resources: the most subscriber connections
 * one counted on the release channels (this engine's own watch is one of them; `Infinity` when
 * one did not say), and the longest remaining poll mark (ms; 0 when none).
 */
function othersOf(tally: Tally<AcquireAnswer>): { watchers: number; polled: number } {
  let watchers = 0;
  let polled = 0;
  for (const r of tally.replies) {
    if (r?.kind !== 'reply' || !r.value.granted) continue;
    watchers = Math.max(watchers, (r.value as FairAcquireAnswer).watchers ?? Infinity);
    polled = Math.max(polled, (r.value as FairAcquireAnswer).polled ?? 0);
  }
  return { watchers, polled };
}

/** Whether a granting master said that other engines wait in the resource's order. */
function othersWaitIn(tally: Tally<AcquireAnswer>): boolean {
  for (const r of tally.replies) {
    if (
      r?.kind === 'reply' &&
      r.value.granted &&
      (r.value as FairAcquireAnswer).othersWait === true
    )
      return true;
  }
  return false;
}
