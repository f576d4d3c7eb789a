/**
 * Restart quarantine (REDLOCK.md, "Crash recovery"): a master that restarted without its data
 * must not vote until every lock it may have held has expired. The engine enforces the
 * "delayed restart" rule on the client side.
 */
import type { Redis } from 'ioredis';
import { Lock, LockContendedError, NoQuorumError, Redlock, RedlockError } from '../../lib';
import type { RedlockSettings } from '../../lib';
import { RedisMasters } from '../harness/redis-masters';
import { uniqueResource, valuesOn, waitUntil } from '../harness/util';

const TTL = 1500;

interface World {
  masters: RedisMasters;
  a: Redlock;
  b: Redlock;
  bClients: Redis[];
  probe: Redis[];
}

const worlds: World[] = [];

async function world(quarantine: boolean, appendFsyncAlways = false): Promise<World> {
  const masters = await RedisMasters.start(5, { appendFsyncAlways });
  const settings: RedlockSettings = {
    ttl: TTL,
    maxTtl: TTL,
    requestTimeout: 50,
    retryDelay: 50,
    retryJitter: 20,
    quarantine: quarantine ? {} : false,
  };
  const aClients = masters.createClients();
  const bClients = masters.createClients();
  const w: World = {
    masters,
    a: new Redlock(aClients, settings),
    // B's votes are what the tests read: 250 ms per master, so that a master busy with B's
    // post-connect check after its restart answers `quarantined` rather than `timeout` on a
    // loaded machine (flake check: the restarted master's vote was a timeout once).
    b: new Redlock(bClients, { ...settings, requestTimeout: 250 }),
    bClients,
    probe: masters.createClients(),
  };
  worlds.push(w);
  // A's clients too: restartScenario waits for A's SET on every master, and a connection still
  // being made (no offline queue) fails its command at once — under load the SET never landed
  // on that master and the wait timed out (flake check, ioredis 5, quarantine disabled).
  await RedisMasters.ready([...w.probe, ...aClients, ...bClients]);
  return w;
}

/** Waits until the quarantine of freshly started masters has passed (they are new processes). */
async function aged(w: World): Promise<void> {
  const r = uniqueResource('warmup');
  await waitUntil(async () => {
    const lock = await w.a.tryAcquire(r).catch(() => null);
    if (!lock) return false;
    await lock.release();
    return true;
  }, 10_000);
}

afterAll(async () => {
  for (const w of worlds) {
    await Promise.all([w.a.close(), w.b.close()]);
    await w.masters.stop();
  }
});

/**
 * The design page's scenario: A holds a lock on a bare majority (masters 0, 1, 2 — its SETs on
 * 3 and 4 never landed), master 2 restarts empty, contender B asks for the same resource while
 * A's lock is valid. Returns B's lock, or null.
 */
async function restartScenario(w: World): Promise<{ a: Lock; b: Lock | RedlockError }> {
  const r = uniqueResource('crash');
  const a = await w.a.acquire(r);
  // Wait for A's SETs to land everywhere, then make them "never have landed" on 3 and 4.
  await waitUntil(async () => (await valuesOn(w.probe, w.a.keyOf(r))).every((v) => v === a.value));
  await Promise.all(w.probe.slice(3).map((c) => c.del(w.a.keyOf(r))));
  await w.masters.masters[2].restart();
  // B's own connection to master 2 reconnects (retry every 50 ms); then it tries while A is valid.
  await RedisMasters.ready([...w.probe, ...w.bClients]);
  const b = await w.b.acquire(r, { retryCount: 0 }).catch((e: unknown) => e as RedlockError);
  expect(a.remainingValidity).toBeGreaterThan(0);
  return { a, b };
}

it('keeps a restarted master from voting: the contender cannot win while the first lock is valid', async () => {
  const w = await world(true);
  await aged(w);
  const { a, b } = await restartScenario(w);
  // B is refused: without the restarted master's vote, masters 3 and 4 are not a quorum.
  expect(b).toBeInstanceOf(LockContendedError);
  const votes = (b as LockContendedError).votes;
  expect(votes[2].outcome).toBe('quarantined'); // the restarted master
  expect(votes.filter((v) => v.outcome === 'held')).toHaveLength(2); // masters 0 and 1: A's lock
  expect(a.isValid).toBe(true);
  await a.release();
});

it('the same scenario breaks mutual exclusion with quarantine disabled (the test can fail)', async () => {
  const w = await world(false);
  const { a, b } = await restartScenario(w);
  expect(b).toBeInstanceOf(Lock); // two holders at once: what quarantine prevents
  expect(a.isValid).toBe(true);
  await Promise.all([a.release(), (b as Lock).release()]);
});

it('a majority restart makes locking unavailable for about the max TTL, then recovers by itself', async () => {
  const w = await world(true);
  await aged(w);
  await Promise.all([0, 1, 2].map((i) => w.masters.masters[i].restart()));
  await RedisMasters.ready(w.probe);
  const r = uniqueResource('majority');
  const started = Date.now();
  const first = await w.b.acquire(r, { retryCount: 0 }).catch((e: unknown) => e);
  expect(first).toBeInstanceOf(NoQuorumError);
  expect(
    (first as NoQuorumError).votes.filter((v) => v.outcome === 'quarantined').length,
  ).toBeGreaterThanOrEqual(1);
  const lock = await w.b
    .acquire(r, { retryCount: 1000, waitTimeout: 10_000 })
    .catch((e: unknown) => {
      const err = e as NoQuorumError;
      throw new Error(
        `acquire failed after ${err.attempts} attempts, ${err.elapsed} ms: ${err.message}`,
      );
    });
  const unavailableFor = Date.now() - started;
  const duration = w.b.settings.quarantine.duration;
  // Not before the quarantine ends (counted from the restart, which was before `started`)...
  expect(unavailableFor).toBeGreaterThan(duration - 500);
  // ...and not much after it: the engine recovers by itself.
  expect(unavailableFor).toBeLessThan(duration + 3000);
  await lock.release();
});

it('trusts masters that persist every write (AOF, appendfsync always) at once', async () => {
  const w = await world(true, true);
  // Fresh processes, yet no quarantine: their data survives a restart.
  await waitUntil(() => w.b.masterCount === 5);
  const lock = await w.b.acquire(uniqueResource('durable'), { retryCount: 20 });
  expect(lock.votes.some((v) => v.outcome === 'quarantined')).toBe(false);
  await lock.release();
});

it('quarantines a master whose data was flushed (FLUSHALL), without a restart', async () => {
  const w = await world(true);
  await aged(w);
  await Promise.all(w.probe.slice(0, 3).map((c) => c.flushall()));
  const error = await w.b
    .acquire(uniqueResource('flushed'), { retryCount: 0 })
    .catch((e: unknown) => e);
  expect(error).toBeInstanceOf(NoQuorumError);
  expect((error as NoQuorumError).votes.filter((v) => v.outcome === 'quarantined')).toHaveLength(3);
});
