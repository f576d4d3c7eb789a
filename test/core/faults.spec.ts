/**
 * Fault tolerance of the engine (REDLOCK.md: "Properties we promise" — liveness B, and
 * "N masters" steps 2 and 5): killed and paused masters, against 5 real redis-server processes.
 * Every test restores the masters it broke.
 */
import type { Redis } from 'ioredis';
import { LockContendedError, NoQuorumError, Redlock } from '../../lib';
import { RELEASE_SCRIPT } from '../../lib/core/redis/scripts/release';
import { RedisMasters } from '../harness/redis-masters';
import { sleep, uniqueResource, valuesOn, waitUntil } from '../harness/util';

let masters: RedisMasters;
let clients: Redis[];
let probe: Redis[];
let rl: Redlock;
/**
 * The same engine with 250 ms per master, for the tests whose assertions need every live master
 * to answer in time (all 3 of 3 up, or 4 of 4): a live master slower than 50 ms on a loaded
 * machine turned a release into `deleted: 2` or a contention into an outage. `rl` (50 ms) stays
 * for the tests of the timeout behaviour itself.
 */
let steady: Redlock;

beforeAll(async () => {
  masters = await RedisMasters.start(5);
  clients = masters.createClients();
  probe = masters.createClients();
  await RedisMasters.ready([...clients, ...probe]);
  // Fresh private masters: no lock predates them (quarantine is tested in quarantine.spec.ts).
  rl = new Redlock(clients, {
    quarantine: false,
    requestTimeout: 50,
    retryDelay: 20,
    retryJitter: 10,
  });
  steady = new Redlock(clients, {
    quarantine: false,
    requestTimeout: 250,
    retryDelay: 20,
    retryJitter: 10,
  });
});

afterAll(async () => {
  await Promise.all([rl.close(), steady.close()]);
  await masters.stop();
});

/** Restarts the given masters (they come back empty) and waits for the engine's clients. */
async function revive(indexes: number[]): Promise<void> {
  for (const m of masters.masters) m.resume();
  await Promise.all(indexes.map((i) => masters.masters[i].start()));
  await RedisMasters.ready([...clients, ...probe]);
}

it('acquires and releases with 2 of 5 masters killed', async () => {
  await Promise.all([masters.masters[3].kill(), masters.masters[4].kill()]);
  try {
    const r = uniqueResource('two-down');
    const lock = await steady.acquire(r);
    expect(lock.votes.filter((v) => v.outcome === 'ok')).toHaveLength(3);
    expect(await valuesOn(probe.slice(0, 3), steady.keyOf(r))).toEqual(Array(3).fill(lock.value));
    const result = await lock.release();
    expect(result.deleted).toBe(3);
    expect(result.complete).toBe(false); // two masters could not be asked
    expect(await valuesOn(probe.slice(0, 3), steady.keyOf(r))).toEqual([null, null, null]);
    // A second holder can take it right away.
    const next = await steady.acquire(r, { retryCount: 0 });
    await next.release();
  } finally {
    await revive([3, 4]);
  }
});

it('reports contention, not an outage, when the lock is held and 2 of 5 masters are down', async () => {
  const r = uniqueResource('held-two-down');
  const holder = await steady.acquire(r);
  await Promise.all([masters.masters[3].kill(), masters.masters[4].kill()]);
  try {
    // Waiting for the holder would help (3 masters are up), so this is contention (HTTP 423),
    // not "no quorum" (503) — however early the attempt was decided.
    expect(await steady.tryAcquire(r)).toBeNull();
    const error = await steady.acquire(r, { retryCount: 0 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockContendedError);
  } finally {
    await holder.release();
    await revive([3, 4]);
  }
});

it('fails with NoQuorumError in bounded time with 3 of 5 killed, leaving nothing behind', async () => {
  await Promise.all([2, 3, 4].map((i) => masters.masters[i].kill()));
  try {
    const r = uniqueResource('three-down');
    const started = Date.now();
    const error = await rl.acquire(r, { retryCount: 3 }).catch((e: unknown) => e);
    const waited = Date.now() - started;
    expect(error).toBeInstanceOf(NoQuorumError);
    expect((error as NoQuorumError).reason).toBe('unavailable');
    expect((error as NoQuorumError).attempts).toBe(4);
    expect((error as NoQuorumError).votes.filter((v) => v.outcome === 'error')).toHaveLength(3);
    // 4 attempts, 3 delays of at most 30 ms, each attempt and cleanup bounded by 50 ms timeouts.
    expect(waited).toBeLessThan(4 * (2 * 50) + 3 * 30 + 500);
    expect(await valuesOn(probe.slice(0, 2), rl.keyOf(r))).toEqual([null, null]);
  } finally {
    await revive([2, 3, 4]);
  }
  // Recovery once they are back.
  const lock = await rl.acquire(uniqueResource('recovered'));
  await lock.release();
});

it('does not wait for a paused (SIGSTOP) master beyond the request timeout', async () => {
  masters.masters[4].pause();
  try {
    const r = uniqueResource('paused');
    const started = Date.now();
    const lock = await rl.acquire(r);
    expect(Date.now() - started).toBeLessThan(50 + 200);
    expect(lock.votes[4].outcome).toMatch(/pending|timeout/);
    const released = await lock.release();
    expect(released.votes[4].outcome).toMatch(/pending|timeout/);

    // With 3 paused, the attempt is decided by the timeouts: no hang.
    masters.masters[2].pause();
    masters.masters[3].pause();
    const t0 = Date.now();
    const error = await rl
      .acquire(uniqueResource('paused3'), { retryCount: 0 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NoQuorumError);
    expect((error as NoQuorumError).votes.filter((v) => v.outcome === 'timeout')).toHaveLength(3);
    expect(Date.now() - t0).toBeLessThan(2 * 50 + 300);
  } finally {
    for (const m of masters.masters) m.resume();
  }
  // The SETs queued on the paused masters run when they resume; the release queued behind them
  // on the same connection removes them again (REDLOCK.md step 5: release on all masters).
  await sleep(50);
  await waitUntil(
    async () => (await probe[4].dbsize()) === 0 || (await probe[4].keys('lock:{*')).length === 0,
  );
});

it('deletes the key on a master that did not acknowledge the acquire', async () => {
  const r = uniqueResource('late-ack');
  masters.masters[4].pause();
  let lock;
  try {
    lock = await steady.acquire(r, { ttl: 10_000 });
    expect(lock.votes[4].outcome).not.toBe('ok');
  } finally {
    masters.masters[4].resume();
  }
  // The paused master executes the SET once resumed: it now holds our token too.
  await waitUntil(async () => (await probe[4].get(steady.keyOf(r))) === lock.value);
  await lock.release();
  await waitUntil(async () => (await valuesOn(probe, steady.keyOf(r))).every((v) => v === null));
});

it('never lets a late acquire land after its own clean-up when a master lost its scripts', async () => {
  // Master 4 knows the release script but not the acquire script (e.g. after SCRIPT FLUSH and
  // another client's release): its EVALSHA acquire answers NOSCRIPT after the clean-up's
  // EVALSHA release was already queued behind it. An EVAL fallback would then set the key
  // after its own release — an orphan lock. The engine drops the fallback once decided.
  const r = uniqueResource('noscript');
  const holder = await steady.acquire(r, { ttl: 10_000 });
  await waitUntil(async () => (await probe[4].get(steady.keyOf(r))) === holder.value);
  await probe[4].del(steady.keyOf(r)); // master 4 would grant r
  await probe[4].script('FLUSH');
  await probe[4].script('LOAD', RELEASE_SCRIPT.source);
  masters.masters[4].pause();
  try {
    expect(await steady.tryAcquire(r)).toBeNull(); // decided by masters 0-3: contended
  } finally {
    masters.masters[4].resume();
  }
  await sleep(100);
  expect(await probe[4].get(steady.keyOf(r))).toBeNull();
  await holder.release();
});
