/**
 * One acquire attempt on the masters (docs/REDLOCK.md, "N masters", steps 1–5) for
 * {@link RedisStore}: the kind's script to every master in one voting round, the verdict, the
 * fencing tokens, and the clean-up of a failed attempt. Split from redis-store.ts like
 * redis-extend.ts and redis-inspect.ts.
 */
import { monotonicNow } from './clock';
import { counterKeyOf } from './keys';
import type { AcquireAnswer, AcquireInput, GroupReply, LockKind, ScriptCall } from './kinds/kind';
import { mismatchIn, waitInput } from './kinds/store-kinds';
import { parkKey } from './kinds/kind-keys';
import { aliveArg } from './install-order';
import type { MasterNode } from './masters/node';
import type { AttemptOutcome, AttemptRequest, Grant, Refusal } from './store';
import { fencingTokensOf } from './quorum/fencing-tokens';
import type { Tally } from './quorum/round';
import {
  acquireVerdict,
  attemptTimeout,
  mayHoldToken,
  validUntil,
  validityAfter,
} from './quorum/protocol';
import type { RedisContext } from './redis-context';
import { withFields } from './fields';
import { newToken } from './token';
import { FENCE_RAISE_SCRIPT } from './scripts/fencing';

/**
 * One attempt (docs/REDLOCK.md, "N masters", steps 1–5): a grant, or the reason it
 * was not granted, with the clean-up of a failed attempt already sent.
 */
export async function attemptOnMasters(
  store: RedisContext,
  req: AttemptRequest,
): Promise<AttemptOutcome> {
  const { resources, ttl } = req;
  const { driftFactor, fencing, quarantine, keyPrefix } = store.settings;
  const kind = store.kindOf(req.kind);
  const quorum = kind.quorum(store.nodes.length, store.quorum);
  const token = newToken(store.engineId);
  const start = monotonicNow();
  const wallStart = Date.now();
  const keys = resources.map((r) => store.keyOf(r));
  // Writer-waiting flags, poll marks, and the order of ordered yields (with announcements).
  const fair = store.settings.fairness === 'across-processes';
  const wait = waitInput(kind, req.writerWait, keyPrefix, resources, fair, store.settings.handoff);
  // One object shape for every attempt (no spreads on the hot path: fields.ts).
  const input: AcquireInput = {
    token,
    ttl,
    keys,
    fenceKeys: fencing ? keys.map((k) => counterKeyOf(keyPrefix, k)) : undefined,
    marker: undefined,
    markerBirth: undefined,
    fenceTtl: store.settings.fencingKeyTtl,
    waitKeys: wait.waitKeys,
    waitTtl: wait.waitTtl,
    clearFlags: req.clearWriterFlags === true,
    pollKeys: wait.pollKeys,
    handoverFrom: kind.name === 'mutex' ? req.handoverFrom : undefined,
    defer: req.defer === true,
    orderKeys: wait.orderKeys,
    waitSince: wait.orderKeys ? (req.waitSince ?? wallStart) : undefined,
    // Hand-over across processes (redis-install.ts): parked only while this engine hears the
    // installs (not for a local take-over, which another engine's lock never refuses).
    park:
      wait.orderKeys && req.handoverFrom === undefined && store.hears(keys[0])
        ? parkInput(store, resources[0], ttl, start, wallStart)
        : undefined,
  };
  // Built once per attempt, when first needed; a Cluster master gets one call per slot group.
  let plain: ScriptCall | undefined; // for masters whose boot marker is not checked
  let withMarker: ScriptCall | undefined; // the full marker check; per master its known birth
  const forNode = (node: MasterNode): ScriptCall =>
    node.checksMarker
      ? withBirth(
          (withMarker ??= kind.acquire(withFields(input, { marker: store.markerKey }))),
          node,
        )
      : (plain ??= kind.acquire(input));
  // A master that lost its scripts answers NOSCRIPT and gets an EVAL afterwards. That EVAL
  // must never land after this token's release on the same connection: it is sent only while
  // the attempt has not failed (its clean-up not yet sent) and its lock has not ended.
  const state: { failed: boolean; grant?: Grant } = { failed: false };
  const wanted = (): boolean => !state.failed && !state.grant?.ended;
  const tally = await store.round<AcquireAnswer>({
    quorum,
    timeout: attemptTimeout(store.settings.requestTimeout, ttl, driftFactor),
    send: (node) =>
      store.dispatch.afterCheck(node, wanted, () =>
        store.dispatch.read(
          node,
          resources,
          keys,
          (groupKeys, group) => {
            if (group === resources) return forNode(node);
            const groupWait = input.waitKeys && waitInput(kind, 1, keyPrefix, group, fair);
            return kind.acquire(
              withFields(input, {
                keys: groupKeys,
                fenceKeys: fencing ? groupKeys.map((k) => counterKeyOf(keyPrefix, k)) : undefined,
                waitKeys: groupWait?.waitKeys,
                pollKeys: groupWait?.pollKeys,
              }),
            );
          },
          input.handoverFrom === undefined
            ? (groups) => kind.readAcquire(groups, resources)
            : (groups) => readHandover(kind, groups, resources),
          wanted,
        ),
      ),
    judge: (a, node) => {
      if (a.markerAge !== undefined) store.noteMarkerAge(node);
      if (!a.granted) return 'held';
      const young = a.markerAge !== undefined && a.markerAge < quarantine.duration;
      return node.checksMarker && young ? 'quarantined' : 'ok';
    },
    holderTtl: (a) => a.holderTtl,
    // A hand-over's releasing holder releases only where the take-over did not land at the end
    // (Grant.takenOver), not on every master still pending at the verdict.
    lateVotes: input.handoverFrom !== undefined,
  });
  store.noteQuarantined(tally);
  const fail = (refusal: Refusal, found?: AcquireAnswer['mismatch']): AttemptOutcome => {
    state.failed = true; // from here on, no late EVAL fallback may follow the clean-up
    const maybeSet = store.nodes.filter((n, i) => mayHoldToken(tally.votes[i], n.cluster));
    // Sent now, in order on each master's connection, so it runs before any later attempt;
    // awaited only before the failure is surfaced to the caller — and then every master it went
    // to has answered (or timed out): a refused caller finds no key of its attempt left.
    // Announced (published only where a key of ours was deleted): another waiter refused by
    // these short-lived keys sleeps until their expiry or an announcement, and without one it
    // would sleep a whole ttl after the keys were gone. As a clean-up (`~token`, ignored by
    // waiters refused by one holder with a quorum) — or, when this attempt may have been set on
    // a quorum itself, as a release: a waiter may have taken it for that one holder.
    const announce = maybeSet.length >= quorum ? 'release' : 'cleanup';
    if (maybeSet.length > 0) store.ignoreOwn(resources, token, announce === 'cleanup');
    const cleanup =
      maybeSet.length > 0
        ? store
            .releaseKeys(resources, token, {
              only: maybeSet,
              announce,
              waitAll: true,
              kind: req.kind,
            })
            .then(() => undefined)
        : undefined;
    return {
      refusal,
      votes: tally.votes,
      cleanup,
      quorum,
      heldBy: refusal === 'contended' ? holderWithQuorum(tally.replies, quorum) : undefined,
      waitSince: input.waitSince,
      ...(found ? { found } : {}),
    };
  };
  // Another kind at a key on any master: an error, whatever the other votes (kinds never mix).
  const found = mismatchIn(tally);
  if (found) return fail('kind-mismatch', found);
  const verdict = acquireVerdict(tally.votes, tally.ok, quorum);
  if (verdict !== 'quorum') return fail(verdict);
  const exhausted = (): boolean => validityAfter(ttl, start, monotonicNow(), driftFactor) <= 0;
  let fencingTokens: readonly number[] = [];
  if (fencing && !exhausted()) {
    const counters = tally.replies.map((r) => (r?.kind === 'reply' ? r.value.counters : undefined));
    const found = fencingTokensOf(counters, resources, quorum);
    if (found.settled) fencingTokens = found.tokens;
    else {
      const deadline = validUntil(start, ttl, driftFactor);
      const confirmed = await raiseFences(
        store,
        resources,
        found.tokens,
        (i) => !found.atMax(counters[i]),
        deadline,
        quorum,
      );
      if (confirmed < quorum && !exhausted()) return fail('unavailable');
      fencingTokens = found.tokens;
    }
  }
  if (exhausted()) return fail('validity-exhausted');
  const grant: Grant = (state.grant = {
    resources,
    token,
    ttl,
    start,
    wallStart,
    votes: tally.votes,
    fencingTokens,
    ended: false,
    othersWait: input.orderKeys !== undefined && othersWaitIn(tally),
    ...(req.kind && req.kind.name !== 'mutex' ? { kind: req.kind } : {}),
    ...(input.handoverFrom === undefined
      ? {}
      : withFields(othersOf(tally), { takenOver: tally.final, installedBy: req.installedBy })),
  });
  if (input.park) store.installs.retire(input.park.token); // (redis-install.ts)
  return { grant };
}

/** The park of an attempt (AcquireInput.park). */
function parkInput(
  store: RedisContext,
  resource: string,
  ttl: number,
  start: number,
  wall: number,
): AcquireInput['park'] {
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
    watchers = Math.max(watchers, r.value.watchers ?? Infinity);
    polled = Math.max(polled, r.value.polled ?? 0);
  }
  return { watchers, polled };
}

/** Whether a granting master said that other engines wait in the resource's order. */
function othersWaitIn(tally: Tally<AcquireAnswer>): boolean {
  for (const r of tally.replies) {
    if (r?.kind === 'reply' && r.value.granted && r.value.othersWait === true) return true;
  }
  return false;
}

/**
 * The token of the one plain lock that refused the attempt on a quorum of masters, if any: that
 * holder holds the resource, and only its release frees it (not another engine's failed attempt).
 */
function holderWithQuorum(
  replies: Tally<AcquireAnswer>['replies'],
  quorum: number,
): string | undefined {
  const counts = new Map<string, number>();
  for (const r of replies) {
    const holder = r?.kind === 'reply' ? r.value.holder : undefined;
    if (holder === undefined) continue;
    const c = (counts.get(holder) ?? 0) + 1;
    if (c >= quorum) return holder;
    counts.set(holder, c);
  }
  return undefined;
}

/**
 * The acquire call for a master whose boot marker is checked: `full` (the shared full check) with
 * the marker value this master is known to hold put in (no clock read on the master, see
 * MasterNode.knownBirth), when the kind's script takes one (`ScriptCall.birthArg`).
 */
function withBirth(full: ScriptCall, node: MasterNode): ScriptCall {
  const birth = node.knownBirth;
  if (birth === undefined || full.birthArg === undefined) return full;
  const args = full.args.slice();
  args[full.birthArg] = birth;
  return {
    script: full.script,
    keys: full.keys,
    args,
    birthArg: full.birthArg,
    followUp: full.followUp,
  };
}

/**
 * Raises the fencing counters (set-if-greater) where `needs(i)`; resolves with the confirmations.
 * `quorum`: the confirmations the lock's kind needs (a semaphore's may exceed the store's); the
 * round ends early only once that many confirmed.
 */
export async function raiseFences(
  store: RedisContext,
  resources: readonly string[],
  tokens: readonly number[],
  needs: (i: number) => boolean,
  deadline: number,
  quorum = store.quorum,
): Promise<number> {
  const left = deadline - monotonicNow();
  if (left <= 0) return 0;
  const ttl = String(store.settings.fencingKeyTtl);
  const tokenOf = new Map(resources.map((r, j) => [r, tokens[j]]));
  const raised = await store.round<unknown>({
    quorum,
    timeout: Math.min(store.settings.requestTimeout, left),
    send: (node) =>
      needs(node.index)
        ? store.dispatch.grouped(node, resources, [], (_keys, group) => ({
            script: FENCE_RAISE_SCRIPT,
            keys: group.map((r) => store.fenceKeyOf(r)),
            args: [ttl, ...group.map((r) => String(tokenOf.get(r)))],
          }))
        : Promise.resolve(1),
    judge: () => 'ok',
  });
  return raised.ok;
}
