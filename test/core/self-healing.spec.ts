/**
 * Self-healing extension: an extension puts a lost key
 * back with `SET NX` (same token), so a lock held with auto-extension survives a master that
 * restarted empty followed by the failure of another master. Repaired masters and masters in
 * restart quarantine do not count toward the extension's quorum; another holder's key is never
 * overwritten. The `repairOnExtend: false` variant is the old behaviour: the same scenario loses
 * the lock.
 */
import type { Redis } from 'ioredis';
import { LockLostError, NoQuorumError } from '../../lib/core/base/errors';
import type { NodeOutcome } from '../../lib/core/base/errors';
import { fenceKey } from '../../lib/core/base/keys';
import type { Lock } from '../../lib/core/lock/lock';
import { Redlock } from '../../lib/core/redlock';
import type { RedlockSettings } from '../../lib/core/base/settings';
import { RedisMasters } from '../harness/redis-masters';
import { sleep, uniqueResource, valuesOn, waitUntil } from '../harness/util';

// Short ttls keep the scenario to seconds; the quarantine is set explicitly (longer than the
// ttl, as the default would be) so that a restarted master stays in it for a few extensions.
const TTL = 1000;
const QUARANTINE = 2500;

interface World {
  masters: RedisMasters;
  clients: Redis[];
  probe: Redis[];
  engine: Redlock;
}

const worlds: World[] = [];

async function world(n: number, settings: RedlockSettings = {}): Promise<World> {
  const masters = await RedisMasters.start(n);
  const clients = masters.createClients();
  const probe = masters.createClients();
  const engine = new Redlock(clients, {
    ttl: TTL,
    maxTtl: TTL,
    requestTimeout: 100,
    retryDelay: 20,
    retryJitter: 10,
    quarantine: { duration: QUARANTINE },
    logger: { warn: () => undefined },
    ...settings,
  });
  const w = { masters, clients, probe, engine };
  worlds.push(w);
  await RedisMasters.ready([...clients, ...probe]);
  return w;
}

/** Waits until the engine sees every master out of quarantine (fresh processes start in it). */
async function aged(w: World): Promise<void> {
  await waitUntil(
    async () => (await w.engine.health()).usable === w.masters.masters.length,
    10_000,
  );
}

afterAll(async () => {
  for (const w of worlds) {
    await w.engine.close();
    await w.masters.stop();
  }
});

/** A routine for `using()` that holds the lock until `finish()` is called. */
function holder(): {
  run: (signal: AbortSignal, lock: Lock) => Promise<boolean>;
  lock: () => Lock | undefined;
  signal: () => AbortSignal | undefined;
  finish: () => void;
} {
  let lock: Lock | undefined;
  let signal: AbortSignal | undefined;
  let finish!: () => void;
  const done = new Promise<void>((r) => (finish = r));
  return {
    run: async (s, l) => {
      signal = s;
      lock = l;
      await done;
      return s.aborted;
    },
    lock: () => lock,
    signal: () => signal,
    finish: () => finish(),
  };
}

/**
 * The scenario: hold a lock with auto-extension, restart master 2 empty, wait past its
 * quarantine, then kill master 0. Returns once the lock either survived `extensions` more
 * extensions after the kill or was lost.
 */
async function restartThenFail(repairOnExtend: boolean): Promise<{
  aborted: boolean;
  onRestarted: string | null;
  values: (string | null)[];
  token: string;
}> {
  const w = await world(3, { repairOnExtend });
  await aged(w);
  const r = uniqueResource('heal');
  const key = w.engine.keyOf(r);
  const h = holder();
  const using = w.engine.using(r, h.run, { ttl: TTL });
  try {
    await waitUntil(() => h.lock() !== undefined);
    const lock = h.lock() as Lock;
    await waitUntil(async () => (await valuesOn(w.probe, key)).every((v) => v === lock.value));

    await w.masters.masters[2].restart();
    await RedisMasters.ready([...w.clients, ...w.probe]);
    // Past its quarantine, as the engine sees it...
    await waitUntil(async () => {
      const health = await w.engine.health();
      return health.masters[2].reachable && !health.masters[2].quarantined;
    }, QUARANTINE + 5000);
    // ...and two more extensions: with the repair, the key put back there has been kept since a
    // successful extension, so it counts again (its vote may read `pending` when masters 0 and 1
    // answered first); without it, nothing ever puts the key back there.
    const seen = lock.extensions;
    await waitUntil(() => h.signal()?.aborted === true || lock.extensions >= seen + 2, 5000);
    expect(h.signal()?.aborted).toBe(false);
    const onRestarted = (await valuesOn(w.probe, key))[2];

    await w.masters.masters[0].kill();
    const atKill = lock.extensions;
    await waitUntil(() => h.signal()?.aborted === true || lock.extensions >= atKill + 3, 8000);
    return {
      aborted: h.signal()?.aborted === true,
      onRestarted,
      values: await valuesOn(w.probe, key),
      token: lock.value,
    };
  } finally {
    h.finish();
    await using;
  }
}

it('a lock held with auto-extension survives a master restart followed by another failure', async () => {
  const { aborted, onRestarted, values, token } = await restartThenFail(true);
  expect(onRestarted).toBe(token); // the extension put the key back on the restarted master
  expect(aborted).toBe(false);
  expect(values[1]).toBe(token);
  expect(values[2]).toBe(token);
});

it('without the repair (repairOnExtend: false) the same scenario loses the lock', async () => {
  const { aborted, onRestarted } = await restartThenFail(false);
  expect(onRestarted).toBeNull(); // the restarted master never gets the key back
  expect(aborted).toBe(true); // one of three masters holds it: lost at the next extension
});

it("never overwrites another holder's key; a repair bumps no fencing counter and does not count", async () => {
  const w = await world(3, { quarantine: false });
  const r = uniqueResource('contender');
  const key = w.engine.keyOf(r);
  const fence = fenceKey(w.engine.settings.keyPrefix, r);
  // The same counter on every master (counters that start from the masters' own clocks differ
  // by 10^6 when the first lock's scripts straddle a second boundary).
  await Promise.all(w.probe.map((c) => c.set(fence, 7_000, 'PX', 60_000)));
  const lock = await w.engine.acquire(r);
  await waitUntil(async () => (await valuesOn(w.probe, key)).every((v) => v === lock.value));
  const counters = await valuesOn(w.probe, fence);
  expect(counters.every((c) => c !== null)).toBe(true);

  // Master 2 lost our key and a contender holds the resource there.
  await w.probe[2].set(key, 'contender', 'PX', 60_000);
  await lock.extend(); // masters 0 and 1 kept it
  expect(['held', 'pending']).toContain(lock.votes[2].outcome);
  await w.probe[2].ping(); // everything the engine sent there has run
  expect(await w.probe[2].get(key)).toBe('contender');
  expect(await w.probe[2].pttl(key)).toBeGreaterThan(50_000); // not even its ttl was touched

  // Now master 1 loses our key and its fencing counter too: only master 0 kept the key.
  await w.probe[1].del(key, fence);
  const error = await lock.extend().catch((e: unknown) => e);
  // Lost: the repair put the key back on master 1 (with master 0, a majority held our token
  // again), but a key put back does not count toward the extension that put it back. Once the
  // loss is known, what the repair put back is removed again.
  expect(error).toBeInstanceOf(LockLostError);
  expect((error as LockLostError).votes[1].outcome).toBe('repaired');
  expect(await w.probe[1].get(key)).toBeNull();
  expect(await w.probe[2].get(key)).toBe('contender');
  // Same token, no new fencing token: the repair bumped no counter (none where it was lost).
  expect(await valuesOn(w.probe, fence)).toEqual([counters[0], null, counters[2]]);
  expect(lock.fencingToken).toBe(Number(counters[0]));

  await lock.release(); // removes what the repair put back; the contender's key stays
  await waitUntil(async () => (await valuesOn(w.probe, key)).slice(0, 2).every((v) => v === null));
  expect(await w.probe[2].get(key)).toBe('contender');
});

it('a master in restart quarantine gets the key back, but its votes do not count until it ends', async () => {
  const w = await world(3);
  await aged(w);
  const r = uniqueResource('quarantined');
  const key = w.engine.keyOf(r);
  const lock = await w.engine.acquire(r);
  await waitUntil(async () => (await valuesOn(w.probe, key)).every((v) => v === lock.value));

  const restarted = Date.now(); // its quarantine ends QUARANTINE ms after its start, or later
  await w.masters.masters[2].restart();
  await RedisMasters.ready([...w.clients, ...w.probe]);
  await lock.extend();
  // The first extension after the restart put the key back (its answer may come after the
  // extension was decided on masters 0 and 1: then it votes `pending`).
  await waitUntil(async () => (await w.probe[2].get(key)) === lock.value);
  expect(await w.probe[2].pttl(key)).toBeGreaterThan(0);

  const outcomes: NodeOutcome[] = [lock.votes[2].outcome];
  const remaining: (number | undefined)[] = [undefined];
  let firstOk = 0;
  // Extend (manually, well within each validity) until master 2 counts again.
  await waitUntil(async () => {
    await sleep(50);
    await lock.extend();
    const vote = lock.votes[2];
    outcomes.push(vote.outcome);
    remaining.push(vote.quarantineRemaining);
    if (vote.outcome === 'ok') firstOk = Date.now();
    // Until it counts, the extension stands on masters 0 and 1, which kept the key.
    else expect(lock.votes.slice(0, 2).map((v) => v.outcome)).toEqual(['ok', 'ok']);
    return vote.outcome === 'ok';
  }, QUARANTINE + 5000);

  // Before it counted, every vote of master 2 said why not (`pending`: not answered before the
  // extension was decided on masters 0 and 1); the last answers before it counted: quarantine.
  const before = outcomes.slice(0, -1);
  expect(before.every((o) => ['pending', 'timeout', 'repaired', 'quarantined'].includes(o))).toBe(
    true,
  );
  const answered = before.filter((o) => o !== 'pending' && o !== 'timeout');
  expect(answered[answered.length - 1]).toBe('quarantined');
  const q = before.lastIndexOf('quarantined');
  expect(remaining[q]).toBeGreaterThan(0);
  expect(remaining[q]).toBeLessThanOrEqual(QUARANTINE);
  expect(firstOk - restarted).toBeGreaterThanOrEqual(QUARANTINE); // not before it ended
  await lock.release();
});

it('keys put back do not count until an extension succeeded without them (no resurrection)', async () => {
  // Five masters, no quarantine: masters 1 and 2 lose the key without a restart (as with
  // eviction), masters 3 and 4 do not answer. Only master 0 kept it.
  const w = await world(5, { quarantine: false, ttl: 3000, maxTtl: 3000 });
  const r = uniqueResource('resurrect');
  const key = w.engine.keyOf(r);
  const lock = await w.engine.acquire(r);
  await waitUntil(async () => (await valuesOn(w.probe, key)).every((v) => v === lock.value));
  await Promise.all([w.probe[1].del(key), w.probe[2].del(key)]);
  const [m3, m4] = [w.masters.masters[3], w.masters.masters[4]];
  m3.pause();
  m4.pause();
  try {
    const first = await lock.extend().catch((e: unknown) => e);
    expect(first).toBeInstanceOf(NoQuorumError);
    expect((first as NoQuorumError).votes.map((v) => v.outcome)).toEqual([
      'ok',
      'repaired',
      'repaired',
      'timeout',
      'timeout',
    ]);
    expect(await valuesOn(w.probe.slice(0, 3), key)).toEqual(Array(3).fill(lock.value));
    // The keys are back on 0, 1 and 2 — a majority — yet 1 and 2 lost them in between: they
    // must not make the lock look held without a break.
    const second = await lock.extend().catch((e: unknown) => e);
    expect(second).toBeInstanceOf(NoQuorumError);
    expect((second as NoQuorumError).votes.map((v) => v.outcome).slice(0, 3)).toEqual([
      'ok',
      'repaired',
      'repaired',
    ]);
  } finally {
    m3.resume();
    m4.resume();
  }
  // Masters 3 and 4 kept the key all along: with master 0 they confirm the lock...
  await lock.extend();
  // ...and from then on 1 and 2 count: with 3 and 4 silent again, 0, 1 and 2 extend it.
  m3.pause();
  m4.pause();
  try {
    await lock.extend();
    expect(lock.votes.map((v) => v.outcome).slice(0, 3)).toEqual(['ok', 'ok', 'ok']);
  } finally {
    m3.resume();
    m4.resume();
  }
  await lock.release();
});

it('a lock that lost its key on a majority is lost; what the repair put back is removed', async () => {
  const w = await world(3, { quarantine: false });
  const r = uniqueResource('majority');
  const key = w.engine.keyOf(r);
  const lock = await w.engine.acquire(r);
  await waitUntil(async () => (await valuesOn(w.probe, key)).every((v) => v === lock.value));
  await Promise.all([w.probe[1].del(key), w.probe[2].del(key)]);
  const error = await lock.extend().catch((e: unknown) => e);
  expect(error).toBeInstanceOf(LockLostError);
  expect(lock.signal.aborted).toBe(true);
  // No stale majority of our token blocks the resource: the masters that had lost the key lost
  // it again, as a plain extension would have left them.
  expect((await valuesOn(w.probe, key)).slice(1)).toEqual([null, null]);
  await lock.release();
  await waitUntil(async () => (await valuesOn(w.probe, key)).every((v) => v === null));
});

it('a lost lock leaves its key where it may have been kept: only keys put back by that round go', async () => {
  const w = await world(5, { quarantine: false, maxTtl: 3000 });
  const r = uniqueResource('late-kept');
  const key = w.engine.keyOf(r);
  const lock = await w.engine.acquire(r, { ttl: 3000 });
  await waitUntil(async () => (await valuesOn(w.probe, key)).every((v) => v === lock.value));
  // Three masters lose the key (the repair puts it back: `repaired`, the lock is lost); master 0
  // kept it but answers after the per-node timeout (paused).
  await Promise.all([w.probe[1].del(key), w.probe[2].del(key), w.probe[3].del(key)]);
  const m0 = w.masters.masters[0];
  m0.pause();
  let error: unknown;
  try {
    error = await lock.extend(3000).catch((e: unknown) => e);
  } finally {
    m0.resume();
  }
  expect(error).toBeInstanceOf(LockLostError);
  expect(lock.signal.aborted).toBe(true);
  // Whatever the paused master runs now, our key stays there (and on master 4, which answered
  // `ok`): deleting a key that may have been kept would open the resource to a contender while
  // the holder is still inside the validity it was given. The masters repaired by this round
  // are emptied again.
  await w.probe[0].ping();
  await sleep(50);
  const values = await valuesOn(w.probe, key);
  expect(values[0]).toBe(lock.value);
  expect(values[4]).toBe(lock.value);
  expect(values.slice(1, 4)).toEqual([null, null, null]);
  await lock.release();
  await waitUntil(async () => (await valuesOn(w.probe, key)).every((v) => v === null));
});
