/**
 * One acquire attempt on the masters (docs/REDLOCK.md, "N masters", steps 1–5) for
 * {@link RedisStore}: the kind's script to every master in one voting round, the verdict, the
 * fencing tokens, and the clean-up of a failed attempt. Split from redis/store.ts like
 * redis/extend.ts and redis/inspect.ts.
 */
import { monotonicNow } from '../base/clock';
import { counterKeyOf, waitKey } from '../base/keys';
import type { AcquireAnswer, AcquireInput, GroupReply, LockKind, ScriptCall } from './kinds/kind';
import type { MasterNode } from './masters/node';
import type { NodeVote } from '../base/errors';
import type { AttemptOutcome, AttemptRequest, Grant, Refusal } from '../store';
import type { Tally } from '../quorum/round';
import {
  acquireVerdict,
  fencingTokensOf,
  attemptTimeout,
  mayHoldToken,
  validUntil,
  validityAfter,
} from '../quorum/protocol';
import type { RedisContext } from './context';
import { withFields } from '../base/fields';
import { newToken } from '../base/token';
import { FENCE_RAISE_SCRIPT } from './scripts/fencing';

/**
 * What a store that writes more than the plain lock adds to each of its attempts (the fair
 * mode: fair/fair-attempt.ts); the plain store gives none.
 */
export interface AttemptParts {
  /** The attempt's input, built once per attempt from the plain one. */
  input(
    plain: AcquireInput,
    kind: LockKind,
    req: AttemptRequest,
    start: number,
    wallStart: number,
  ): AcquireInput;
  /** The input of one Cluster slot group (`group`'s resources), from its plain input. */
  group(plain: AcquireInput, group: readonly string[]): AcquireInput;
  /** How a master's replies are read, when not by the kind itself. */
  read(
    input: AcquireInput,
    kind: LockKind,
    resources: readonly string[],
  ): ((groups: readonly GroupReply[]) => AcquireAnswer) | undefined;
  /** Whether the round keeps counting votes after its verdict (`RoundSpec.lateVotes`). */
  lateVotes(input: AcquireInput): boolean;
  /** The grant, with the store's own fields. */
  granted(
    grant: Grant,
    tally: Tally<AcquireAnswer>,
    input: AcquireInput,
    req: AttemptRequest,
  ): Grant;
  /** A refusal, with the store's own fields. */
  refused(outcome: AttemptOutcome, input: AcquireInput): AttemptOutcome;
}

/**
 * One attempt (docs/REDLOCK.md, "N masters", steps 1–5): a grant, or the reason it
 * was not granted, with the clean-up of a failed attempt already sent.
 */
export async function attemptOnMasters(
  store: RedisContext,
  req: AttemptRequest,
  parts?: AttemptParts,
): Promise<AttemptOutcome> {
  const { resources, ttl } = req;
  const { driftFactor, fencing, quarantine, keyPrefix } = store.settings;
  const kind = store.kindOf(req.kind);
  const quorum = kind.quorum(store.nodes.length, store.quorum);
  const token = newToken(store.engineId);
  const start = monotonicNow();
  const wallStart = Date.now();
  const keys = resources.map((r) => store.keyOf(r));
  // Writer-waiting flags (waitInput below).
  const wait = waitInput(kind, req.writerWait, keyPrefix, resources);
  // One object shape for every attempt (no spreads on the hot path: base/fields.ts).
  const plainInput: AcquireInput = {
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
    clock: store.clocks.enabled,
  };
  const input = parts ? parts.input(plainInput, kind, req, start, wallStart) : plainInput;
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
  const read =
    parts?.read(input, kind, resources) ??
    ((groups: readonly GroupReply[]) => kind.readAcquire(groups, resources));
  // The call for a master: once per attempt (one standalone call), or per Cluster slot group.
  const build = (
    groupKeys: readonly string[],
    group: readonly string[],
    node: MasterNode,
  ): ScriptCall => {
    if (group === resources) return forNode(node);
    const groupInput = withFields(input, {
      keys: groupKeys,
      fenceKeys: fencing ? groupKeys.map((k) => counterKeyOf(keyPrefix, k)) : undefined,
      waitKeys: input.waitKeys && waitInput(kind, 1, keyPrefix, group).waitKeys,
    });
    return kind.acquire(parts ? parts.group(groupInput, group) : groupInput);
  };
  // The master's clock comes in the same round trip (redis/masters/clock-watch.ts).
  const sendTo = (node: MasterNode): Promise<AcquireAnswer> =>
    store.dispatch.read(node, resources, keys, build, read, wanted, store.clocks);
  const tally = await store.round<AcquireAnswer>({
    quorum,
    timeout: attemptTimeout(store.settings.requestTimeout, ttl, driftFactor),
    send: (node, sink, i) =>
      store.dispatch.afterCheckOrNow(node, wanted, sendTo) ??
      store.dispatch.readInto(node, resources, keys, build, read, sink, i, wanted, store.clocks),
    judge: (a, node) => {
      if (a.markerAge !== undefined) store.noteMarkerAge(node);
      if (!a.granted) return 'held';
      const young = a.markerAge !== undefined && a.markerAge < quarantine.duration;
      // A master whose clock jumped does not vote (its keys may have expired early).
      return (node.checksMarker && young) || !store.clocks.counts(node.index)
        ? 'quarantined'
        : 'ok';
    },
    holderTtl: (a) => a.holderTtl,
    lateVotes: parts?.lateVotes(input) ?? false,
  });
  // The clocks first seen in this round are judged against each other before any vote counts.
  const ok = store.clocks.review(tally.votes) > 0 ? okVotes(tally.votes) : tally.ok;
  store.noteQuarantined(tally);
  const fail = (
    refusal: Refusal,
    found?: AcquireAnswer['mismatch'],
    votes: readonly NodeVote[] = tally.votes,
  ): AttemptOutcome => {
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
    const outcome: AttemptOutcome = {
      refusal,
      votes,
      cleanup,
      quorum,
      heldBy: refusal === 'contended' ? holderWithQuorum(tally.replies, quorum) : undefined,
      ...(found ? { found } : {}),
    };
    return parts ? parts.refused(outcome, input) : outcome;
  };
  // Another kind at a key on any master: an error, whatever the other votes (kinds never mix).
  const found = mismatchIn(tally);
  if (found) return fail('kind-mismatch', found);
  const verdict = acquireVerdict(tally.votes, ok, quorum);
  if (verdict !== 'quorum') return fail(verdict);
  const exhausted = (): boolean => validityAfter(ttl, start, monotonicNow(), driftFactor) <= 0;
  let fencingTokens: readonly number[] = [];
  if (fencing && !exhausted()) {
    // The token must be held by as many masters as the store's quorum, whatever this lock's kind:
    // every later grant of the resource (a mutex or shared lock needs that quorum, a semaphore
    // more) then meets one of them (quorum/protocol.ts `fencingTokensOf`). A semaphore's own,
    // larger quorum is not needed here, and asking it made nearly every semaphore grant wait for a
    // raise round (its holders reach different masters, so their counters drift apart). Only
    // masters whose vote counts (not a quarantined one, which may have lost its counter).
    // A master whose data set is too young to count (0: redis/scripts/fencing.ts
    // YOUNG_DATA_SET_MS) is left out like one that did not grant.
    const counters = countersOf(tally);
    const found = fencingTokensOf(counters, resources, store.quorum);
    if (found.settled) fencingTokens = found.tokens;
    else {
      const deadline = validUntil(start, ttl, driftFactor);
      const raised = await raiseFences(
        store,
        resources,
        found.tokens,
        (i) => !found.holds(counters[i]),
        deadline,
      );
      // Not raised on enough masters: unavailable, with the raise round's votes (the acquire's
      // were all granted).
      if (raised.ok < store.quorum && !exhausted()) {
        return fail('unavailable', undefined, raised.votes.length > 0 ? raised.votes : tally.votes);
      }
      fencingTokens = found.tokens;
    }
  }
  if (exhausted()) return fail('validity-exhausted');
  const plainGrant: Grant = {
    resources,
    token,
    ttl,
    start,
    wallStart,
    votes: tally.votes,
    fencingTokens,
    ended: false,
    ...(req.kind && req.kind.name !== 'mutex' ? { kind: req.kind } : {}),
  };
  const grant = (state.grant = parts ? parts.granted(plainGrant, tally, input, req) : plainGrant);
  return { grant };
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
    clocked: full.clocked,
  };
}

/**
 * Raises the fencing counters (set-if-greater) where `needs(i)`; resolves with the confirmations
 * and the round's votes (a master that needed no raise votes `ok`). The round is decided at the
 * store's quorum, which every kind's token needs (see attemptOnMasters).
 */
export async function raiseFences(
  store: RedisContext,
  resources: readonly string[],
  tokens: readonly number[],
  needs: (i: number) => boolean,
  deadline: number,
): Promise<{ readonly ok: number; readonly votes: readonly NodeVote[] }> {
  const left = deadline - monotonicNow();
  if (left <= 0) return { ok: 0, votes: [] };
  const ttl = String(store.settings.fencingKeyTtl);
  const tokenOf = new Map(resources.map((r, j) => [r, tokens[j]]));
  const raised = await store.round<unknown>({
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
  return { ok: raised.ok, votes: raised.votes };
}

/**
 * The writer-waiting flag part of an acquire's input (base/keys.ts `waitKey`, docs/lock-kinds.md):
 * readers always read the flags; a plain lock raises them only when it will retry (`writerWait` > 0
 * ms).
 */
function waitInput(
  kind: LockKind,
  writerWait: number | undefined,
  prefix: string,
  resources: readonly string[],
): { waitKeys?: readonly string[]; waitTtl?: number } {
  const keys = (): string[] => resources.map((r) => waitKey(prefix, r));
  if (kind.name === 'shared') return { waitKeys: keys() };
  if (kind.name === 'mutex' && writerWait) return { waitKeys: keys(), waitTtl: writerWait };
  return {};
}

/**
 * Each master's fencing counters from an acquire round, where its vote counts (`ok`: not a
 * quarantined master, which may have lost its counter) and its data set is old enough (no 0:
 * redis/scripts/fencing.ts YOUNG_DATA_SET_MS); `undefined` for the others.
 */
function countersOf(tally: Tally<AcquireAnswer>): (readonly number[] | undefined)[] {
  const { replies, votes } = tally;
  const counters = new Array<readonly number[] | undefined>(replies.length);
  for (let i = 0; i < replies.length; i++) {
    const r = replies[i];
    const c = r?.kind === 'reply' && votes[i].outcome === 'ok' ? r.value.counters : undefined;
    counters[i] = c && !c.includes(0) ? c : undefined;
  }
  return counters;
}

/** The number of `ok` votes. */
export function okVotes(votes: readonly NodeVote[]): number {
  let ok = 0;
  for (const v of votes) if (v.outcome === 'ok') ok++;
  return ok;
}

/** The other kind a master reported at a key during an acquire round, if any. */
function mismatchIn(tally: Tally<AcquireAnswer>): AcquireAnswer['mismatch'] {
  for (const r of tally.replies) {
    if (r?.kind === 'reply' && r.value.mismatch) return r.value.mismatch;
  }
  return undefined;
}
