/**
 * Issue 53, "Done when" (d): blackholed and refused links of a minority and of a majority of the
 * masters — no overlap.
 *
 * Five real masters; three engines in this process, each over its own clients through its own
 * link proxies (test/harness/faults/link-proxy.ts `LinkMatrix`): `major`, whose links to three
 * masters (a majority) are cut, `minor`, whose links to two (a minority) are cut, and `healthy`.
 * Each case cuts them in one mode — blackhole both ways, up (client → master) or down (master →
 * client), with the blocked bytes held (delivered late when the link heals) or dropped; refused;
 * reset — while `major` holds resource A and `minor` holds resource B, and all three then
 * contend for A and B until the links heal, and a while after.
 *
 * Every holding interval is recorded by its holder's own monotonic validity, in this one process:
 * from the grant to min(release, validity end), the validity end being the latest the engine set
 * (grant, extensions) before any loss. Checked:
 *
 * - mutual exclusion: no two intervals on one resource overlap;
 * - `major` loses its lock (its extensions cannot reach a quorum): its signal aborts with a
 *   LockLostError before the validity ends (the failed extension's round times out first), and no
 *   read of `signal.aborted` by the holder says false once the validity has ended; it is granted
 *   nothing while cut off — every acquire is refused with NoQuorumError or LockContendedError;
 * - `minor` keeps its lock (it is extended on the three masters it reaches), and it and `healthy`
 *   can still lock while `major` cannot;
 * - no acquire takes longer than its per-node timeout allows (the round's timeout and the
 *   clean-up of a failed attempt, plus slack: a hang on a blackholed link would go far past it);
 * - after the links heal (held bytes delivered late, dropped ones' connections reset), `major`
 *   locks again.
 *
 * The proxies run in this process's event loop too, so on a loaded machine a stall of this
 * process delays every reply: the time bounds are judged in the time the loop actually ran
 * ({@link StallMeter}), `minor` may lose its lock in a stall long enough to take it (a paused
 * holder loses its lock, as it should) and `major`'s abort may come after its validity end in one
 * (its signal still reads aborted then). The safety checks allow nothing of the kind.
 *
 * An engine that counted 2 of the 5 masters as a quorum (lib/core/base/settings.ts `majority`
 * one lower) fails every case: `major` keeps extending its lock while cut off and the intervals
 * overlap. One whose keep-alive did not abort the signal when an extension failed
 * (lib/core/policy/keep-alive.ts) fails the `abort` check: the signal aborts only at the expiry
 * timer, after the validity end.
 *
 * The contention is randomized (hold times, pauses, which resource): the seed is in every
 * failure message; PARTITIONS_SEED=<seed> replays each engine's choices (the interleaving is
 * the machine's).
 */
import { randomInt } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import {
  type Lock,
  LockContendedError,
  LockLostError,
  NoQuorumError,
  Redlock,
} from '../../../lib/core';
import { lockState } from '../../../lib/core/lock/lock';
import { LinkMatrix, type PartitionMode } from '../../harness/faults/link-proxy';
import { SUITE_DEFAULTS, useMasters } from '../../harness/engines';
import { RedisMasters } from '../../harness/redis-masters';
import { sleep, uniqueResource } from '../../harness/util';
import { seededRandom } from '../../safety/protocol';

const SEED = Number(process.env.PARTITIONS_SEED ?? randomInt(2 ** 31));
const TTL = 600;
/** Extend with half the ttl left: a blackholed extension times out before the validity ends. */
const EXTEND_THRESHOLD = 300;
const REQUEST_TIMEOUT = 250;
/**
 * Longest a single-attempt acquire may take: its round (the per-node timeout) and, when it
 * fails, the clean-up release it awaits (another), plus slack for a loaded 2-core machine.
 */
const ATTEMPT_BOUND = 2 * REQUEST_TIMEOUT + 1000;
/** How long the cut lasts after both first locks were granted. */
const PARTITION_MS = 1000;
/** How long `minor` keeps its first lock (through at least one extension). */
const MINOR_HOLDS_MS = 700;
/** Contention after the links healed (late bytes arrive then). */
const HEALED_MS = 300;
/** Bound on the iterations of one contention loop (besides its deadline). */
const MAX_ROUNDS = 200;
/**
 * A stall of this process's event loop this long can take `minor`'s lock: its extension round
 * (the per-node timeout, through proxies that run in this same loop) has to fit in the
 * threshold. A holder that is paused past its validity loses its lock, as it should.
 */
const STALL_EXCUSE = 100;

const MAJORITY = [0, 1, 2];
const MINORITY = [3, 4];

const suite = useMasters(5);

type Phase = 'before' | 'partitioned' | 'healed';

const TICK = 10;

/**
 * Stalls of this process's event loop (CPU starvation on a loaded machine, GC): how late a
 * {@link TICK} ms ticker fires. Timing bounds are judged in the time the loop actually ran.
 */
class StallMeter {
  /** Each stall: when the late tick fired and how late it was. */
  private readonly stalls: { at: number; late: number }[] = [];
  private last = performance.now();
  private readonly timer = setInterval(() => {
    const now = performance.now();
    const late = now - this.last - TICK;
    if (late > 2) this.stalls.push({ at: now, late });
    this.last = now;
  }, TICK);

  /** The stalls that overlap [from, to]: their total and the longest, in ms. */
  during(from: number, to: number): { total: number; longest: number } {
    let total = 0;
    let longest = 0;
    for (const s of this.stalls) {
      if (s.at < from || s.at - s.late - TICK > to) continue;
      total += s.late;
      longest = Math.max(longest, s.late);
    }
    return { total, longest };
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

/** One engine and what it did in the current case. */
interface Actor {
  readonly name: 'major' | 'minor' | 'healthy';
  readonly rl: Redlock;
  /** Its clients, one per master, through its own link proxies. */
  readonly clients: Redis[];
}

interface Interval {
  readonly actor: string;
  readonly resource: string;
  readonly start: number;
  readonly end: number;
  readonly phase: Phase;
}

interface Attempt {
  readonly actor: string;
  readonly phase: Phase;
  /** When it was called (monotonic). */
  readonly at: number;
  /** `granted` or the error's class name. */
  readonly outcome: string;
  /** From the call until the grant or the error. */
  readonly ms: number;
}

/** How one hold ended. */
interface Held {
  readonly granted: boolean;
  /** From the grant to the end of the hold (monotonic). */
  readonly start?: number;
  readonly end?: number;
  readonly aborted?: boolean;
  /** When the abort event fired, and the latest validity end the lock had (monotonic). */
  readonly abortedAt?: number;
  readonly validityEnd?: number;
  readonly reason?: unknown;
  readonly extensions?: number;
}

/** The record of one case: what the checks read. */
class CaseRecord {
  readonly intervals: Interval[] = [];
  readonly attempts: Attempt[] = [];
  readonly violations: string[] = [];
  /** Latest validity end (monotonic) each lock had before any loss. */
  readonly validUntil = new Map<Lock, number>();
  phase: Phase = 'before';

  noteValidity(lock: Lock): void {
    const s = lockState(lock);
    if (s.lostReason || s.released) return;
    this.validUntil.set(lock, Math.max(this.validUntil.get(lock) ?? -Infinity, s.validUntil));
  }
}

/** The current case's record. */
function rec(): CaseRecord {
  if (!record) throw new Error('no case running');
  return record;
}

let matrix: LinkMatrix;
let actors: Actor[];
let record: CaseRecord | undefined;

beforeAll(async () => {
  matrix = await LinkMatrix.start(
    3,
    suite.masters.masters.map((m) => m.port),
  );
  const silent = { warn: () => undefined };
  actors = (['major', 'minor', 'healthy'] as const).map((name, c) => {
    const clients = matrix.createClients(c);
    const rl = new Redlock(clients, {
      ...SUITE_DEFAULTS,
      requestTimeout: REQUEST_TIMEOUT,
      logger: silent,
    });
    // Extensions move the validity end: recorded as they happen (before any later loss).
    rl.observe((e) => {
      if (e.type === 'extended') record?.noteValidity(e.lock);
    });
    return { name, rl, clients };
  });
  // Connected, scripts loaded: the cases' first attempts do not pay for the setup.
  for (const { rl, clients } of actors) {
    await RedisMasters.ready(clients);
    await (await rl.acquire(uniqueResource('part-warm-up'), { retryCount: 50 })).release();
  }
  // Closed before the masters stop (useMasters' own teardown comes after).
  suite.closeFirst(async () => {
    await matrix.heal();
    await Promise.all(actors.map((a) => a.rl.close()));
    await matrix.close();
  });
});

/**
 * Holds `resource` through `using()` (auto-extended) from the grant until `done()` says so or
 * the signal aborts; records the interval when granted, and the attempt when it is a single one
 * (`retryCount` 0: the ones the time bound applies to). While it holds, it
 * reads its signal every few ms: once the validity has ended, `aborted` must read true.
 */
async function hold(
  actor: Actor,
  resource: string,
  done: (grantedAt: number) => boolean,
  onGrant?: () => void,
  retryCount = 0,
): Promise<Held> {
  const phase = rec().phase;
  const called = performance.now();
  try {
    return await actor.rl.using(
      resource,
      async (signal, lock) => {
        const start = performance.now();
        if (retryCount === 0) {
          rec().attempts.push({
            actor: actor.name,
            phase,
            at: called,
            outcome: 'granted',
            ms: start - called,
          });
        }
        rec().noteValidity(lock);
        onGrant?.();
        let abortedAt: number | undefined;
        signal.addEventListener('abort', () => (abortedAt = performance.now()), { once: true });
        for (;;) {
          const validUntil = lockState(lock).validUntil;
          const now = performance.now();
          if (signal.aborted) break;
          rec().noteValidity(lock);
          if (now >= validUntil) {
            rec().violations.push(
              `${actor.name} read its signal not aborted ${(now - validUntil).toFixed(1)} ms after its validity ended`,
            );
          }
          if (done(start)) break;
          await sleep(5);
        }
        const end = performance.now();
        rec().intervals.push({
          actor: actor.name,
          resource,
          start,
          end: Math.min(end, rec().validUntil.get(lock) ?? start),
          phase,
        });
        return {
          granted: true,
          start,
          end,
          aborted: signal.aborted,
          abortedAt,
          validityEnd: rec().validUntil.get(lock),
          reason: signal.reason,
          extensions: lock.extensions,
        };
      },
      { ttl: TTL, retryCount, extendThreshold: EXTEND_THRESHOLD },
    );
  } catch (err) {
    const outcome = err instanceof Error ? err.constructor.name : String(err);
    if (retryCount === 0) {
      rec().attempts.push({
        actor: actor.name,
        phase,
        at: called,
        outcome,
        ms: performance.now() - called,
      });
    }
    return { granted: false };
  }
}

/** Acquires and releases `resource` in a loop until `until` (monotonic): random holds and pauses. */
async function contend(
  actor: Actor,
  resources: readonly string[],
  until: number,
  random: () => number,
): Promise<void> {
  for (let round = 0; round < MAX_ROUNDS && performance.now() < until; round++) {
    const resource = resources[Math.floor(random() * resources.length)];
    const holdMs = 10 + random() * 40;
    await hold(actor, resource, (start) => performance.now() - start >= holdMs);
    await sleep(5 + random() * 20);
  }
}

/**
 * Acquires `resource` and releases it: one attempt (recorded, bounded like every attempt) or,
 * with `waitMs`, retried up to that long. Returns `granted` or the error's class name.
 */
async function lockOnce(actor: Actor, resource: string, waitMs?: number): Promise<string> {
  const called = performance.now();
  let outcome: string;
  try {
    const lock = await actor.rl.acquire(
      resource,
      waitMs === undefined
        ? { ttl: TTL, retryCount: 0 }
        : { ttl: TTL, retryCount: 1_000, waitTimeout: waitMs },
    );
    const start = performance.now();
    rec().noteValidity(lock);
    // Held from the grant until the release is called (or the validity end, if sooner).
    const end = Math.min(performance.now(), rec().validUntil.get(lock) ?? start);
    rec().intervals.push({ actor: actor.name, resource, start, end, phase: rec().phase });
    await lock.release();
    outcome = 'granted';
  } catch (err) {
    outcome = err instanceof Error ? err.constructor.name : String(err);
  }
  if (waitMs === undefined) {
    const ms = performance.now() - called;
    rec().attempts.push({ actor: actor.name, phase: rec().phase, at: called, outcome, ms });
  }
  return outcome;
}

/** Pairs of intervals on one resource that overlap (touching ends do not). */
function overlaps(intervals: readonly Interval[]): string[] {
  const found: string[] = [];
  const byResource = new Map<string, Interval[]>();
  for (const i of intervals) byResource.set(i.resource, [...(byResource.get(i.resource) ?? []), i]);
  for (const list of byResource.values()) {
    list.sort((x, y) => x.start - y.start);
    for (let i = 0; i < list.length; i++)
      for (let j = i + 1; j < list.length && list[j].start < list[i].end; j++)
        found.push(
          `${list[i].actor} [${list[i].start.toFixed(1)}, ${list[i].end.toFixed(1)}] and ` +
            `${list[j].actor} [${list[j].start.toFixed(1)}, ${list[j].end.toFixed(1)}] on one resource`,
        );
  }
  return found;
}

const MODES: [string, PartitionMode][] = [
  ['blackholed both ways, bytes held', { kind: 'blackhole', direction: 'both', bytes: 'hold' }],
  ['blackholed both ways, bytes dropped', { kind: 'blackhole', direction: 'both', bytes: 'drop' }],
  ['blackholed up, bytes held', { kind: 'blackhole', direction: 'up', bytes: 'hold' }],
  ['blackholed up, bytes dropped', { kind: 'blackhole', direction: 'up', bytes: 'drop' }],
  ['blackholed down, bytes held', { kind: 'blackhole', direction: 'down', bytes: 'hold' }],
  ['blackholed down, bytes dropped', { kind: 'blackhole', direction: 'down', bytes: 'drop' }],
  ['refused (open connections reset)', { kind: 'refuse', existing: 'reset' }],
  ['reset', { kind: 'reset' }],
];

describe.each(MODES)('links %s', (name, mode) => {
  it('a majority cut loses its lock and is refused, a minority cut keeps locking, no overlap', async () => {
    const seed = (SEED + MODES.findIndex(([n]) => n === name)) >>> 0;
    // One generator per engine: each one's choices replay whatever the interleaving.
    const random = [0, 1, 2].map((i) => seededRandom((seed + i * 0x9e3779b9) >>> 0));
    const [major, minor, healthy] = actors;
    const [a, b] = [uniqueResource('part-a'), uniqueResource('part-b')];
    record = new CaseRecord();
    const meter = new StallMeter();
    try {
      for (const actor of actors) await RedisMasters.ready(actor.clients);

      // `major` holds A and `minor` holds B, then the links are cut.
      let cutAt = Infinity;
      const first = (
        actor: Actor,
        resource: string,
        holdMs: number,
      ): [Promise<Held>, Promise<void>] => {
        let granted!: () => void;
        const grant = new Promise<void>((resolve) => (granted = resolve));
        // Retried: a slow moment before the cut is not what this case is about.
        const held = hold(actor, resource, () => performance.now() >= cutAt + holdMs, granted, 20);
        // Refused (it should not be: nothing is cut yet): fail the case instead of waiting.
        const failed = held.then((h) => {
          if (!h.granted)
            throw new Error(`${actor.name} was not granted ${resource} before the cut`);
        });
        return [held, Promise.race([grant, failed])];
      };
      // `major` holds until its lock is lost (bounded by the cut's end: the check below fails then).
      const [majorFirst, majorGranted] = first(major, a, PARTITION_MS);
      const [minorFirst, minorGranted] = first(minor, b, MINOR_HOLDS_MS);
      await Promise.all([majorGranted, minorGranted]);
      await Promise.all([matrix.partition(0, MAJORITY, mode), matrix.partition(1, MINORITY, mode)]);
      cutAt = performance.now();
      rec().phase = 'partitioned';
      const healAt = cutAt + PARTITION_MS;

      const held = await Promise.all([
        majorFirst.then(async (h) => {
          await contend(major, [a, b], healAt, random[0]);
          return h;
        }),
        minorFirst.then(async (h) => {
          await contend(minor, [a, b], healAt, random[1]);
          return h;
        }),
        contend(healthy, [a, b], healAt, random[2]).then(() => undefined),
      ]);
      const [majorHeld, minorHeld] = held as [Held, Held, undefined];

      // Still cut off: the minority-cut and the healthy engine lock A, the majority-cut one cannot.
      const [healthyCut, minorCut, majorCut] = await Promise.all([
        lockOnce(healthy, a, 5000),
        lockOnce(minor, a, 5000),
        lockOnce(major, a),
      ]);
      const stillCut = { healthy: healthyCut, minor: minorCut, major: majorCut };

      await matrix.heal();
      for (const actor of actors) await RedisMasters.ready(actor.clients);
      rec().phase = 'healed';
      const healedUntil = performance.now() + HEALED_MS;
      await Promise.all(actors.map((actor, i) => contend(actor, [a, b], healedUntil, random[i])));
      // Bytes held by the partition may have set stale keys on delivery: they expire within a ttl.
      const majorAfterHeal = await lockOnce(major, a, 5000);

      // An attempt may take longer by as long as this process's loop stood still meanwhile.
      const slow = rec().attempts.filter(
        (x) => x.ms > ATTEMPT_BOUND + meter.during(x.at, x.at + x.ms).total,
      );
      const minorStall = meter.during(minorHeld.start ?? 0, minorHeld.end ?? 0).longest;
      // `major`'s failed extension ends with the round's timer, EXTEND_THRESHOLD − REQUEST_TIMEOUT
      // before its validity ends; a stall of the loop about that long can make it late.
      const majorAbortedAt = majorHeld.abortedAt ?? Infinity;
      const majorEnd = majorHeld.validityEnd ?? -Infinity;
      const majorStall = meter.during(majorEnd - EXTEND_THRESHOLD, majorAbortedAt).total;
      const majorAbort =
        majorAbortedAt < majorEnd
          ? 'before its validity ended'
          : majorStall >= (EXTEND_THRESHOLD - REQUEST_TIMEOUT) / 2
            ? `late, in a stall of ${Math.round(majorStall)} ms`
            : `${(majorAbortedAt - majorEnd).toFixed(1)} ms after its validity ended`;
      const minorKept = !minorHeld.aborted && (minorHeld.extensions ?? 0) >= 1;
      const majorWhileCut = rec().attempts.filter(
        (x) => x.actor === 'major' && x.phase === 'partitioned',
      );
      const grants = Object.fromEntries(
        actors.map((actor) => [
          actor.name,
          rec().intervals.filter((i) => i.actor === actor.name).length,
        ]),
      );
      const verdict = {
        seed,
        grants,
        overlaps: overlaps(rec().intervals),
        violations: rec().violations,
        slowAcquires: slow,
        // `major`'s first lock: lost (never extended past the cut), its signal aborted before
        // its validity ended.
        majorFirst: {
          granted: majorHeld.granted,
          aborted: majorHeld.aborted,
          lost: majorHeld.reason instanceof LockLostError,
          extensions: majorHeld.extensions,
          abort: majorAbort,
        },
        majorGrantedWhileCut: majorWhileCut.filter((x) => x.outcome === 'granted').length,
        majorRefusals: [...new Set(majorWhileCut.map((x) => x.outcome))].filter(
          (o) => o !== NoQuorumError.name && o !== LockContendedError.name,
        ),
        // `minor`'s first lock: kept and extended on the three masters it reaches — unless this
        // process itself stood still long enough to lose it (a paused holder).
        minorFirst: minorKept
          ? 'kept'
          : minorStall >= STALL_EXCUSE
            ? `lost in a stall of ${Math.round(minorStall)} ms`
            : `lost (aborted: ${minorHeld.aborted}, extensions: ${minorHeld.extensions})`,
        stillCut,
        majorAfterHeal,
      };
      expect(verdict).toEqual({
        seed,
        grants: expect.any(Object) as unknown,
        overlaps: [],
        violations: [],
        slowAcquires: [],
        majorFirst: {
          granted: true,
          aborted: true,
          lost: true,
          extensions: 0,
          abort: expect.stringMatching(/^(before its validity ended|late, in a stall)/) as unknown,
        },
        majorGrantedWhileCut: 0,
        majorRefusals: [],
        minorFirst: expect.stringMatching(/^(kept|lost in a stall)/) as unknown,
        stillCut: {
          healthy: 'granted',
          minor: 'granted',
          major: expect.stringMatching(/^(NoQuorumError|LockContendedError)$/) as unknown,
        },
        majorAfterHeal: 'granted',
      });
    } finally {
      meter.stop();
      await matrix.heal(); // the next case starts healed, whatever happened in this one
    }
  });
});
