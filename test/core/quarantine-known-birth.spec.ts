/**
 * The boot-marker check without a clock read (bootMarkerAge in
 * lib/core/redis/scripts/lua.ts, MasterNode.knownBirth): once a master's marker is known to be older than
 * the quarantine, acquire scripts compare it instead of calling TIME — and a marker that moved
 * (a flush, a re-seed) is still caught on the very next acquire.
 */
import type { Redis } from 'ioredis';
import { Redlock } from '../../lib/core/redlock';
import type { RedlockSettings } from '../../lib/core/base/settings';
import { RedisMasters } from '../harness/redis-masters';
import { uniqueResource, waitUntil } from '../harness/util';

const DURATION = 1500;
const settings: RedlockSettings = {
  ttl: 1000,
  maxTtl: 1000,
  quarantine: { duration: DURATION },
  requestTimeout: 500,
  retryCount: 0,
  fencing: false, // new fencing counters read the clock too; this test counts the marker's reads
  // The clock check sends a TIME of its own with every vote (redis/masters/clock-watch.ts); this
  // test counts the scripts' clock reads.
  clockCheck: false,
};

let masters: RedisMasters;
let probe: Redis[];
const engines: Redlock[] = [];

beforeAll(async () => {
  masters = await RedisMasters.start(3);
  probe = masters.createClients();
  await RedisMasters.ready(probe);
});

afterAll(async () => {
  await Promise.all(engines.map((e) => e.close()));
  await masters.stop();
});

async function timeCalls(client: Redis): Promise<number> {
  const stats = await client.info('commandstats');
  return Number(/cmdstat_time:calls=(\d+)/.exec(stats)?.[1] ?? 0);
}

/** The clients of each engine of this file. */
const clientsOf = new Map<Redlock, Redis[]>();

/**
 * Resolves once every master ran what `rl` sent before (a PING on its own connections): rounds
 * end at a quorum, and the last master's script may still be on its way when a call resolves.
 */
async function settled(rl: Redlock): Promise<void> {
  await Promise.all((clientsOf.get(rl) ?? []).map((c) => c.ping()));
}

/** An engine on aged masters whose every master is out of quarantine and trusted. */
async function trustedEngine(): Promise<Redlock> {
  const clients = masters.createClients();
  await RedisMasters.ready(clients);
  const rl = new Redlock(clients, settings);
  engines.push(rl);
  clientsOf.set(rl, clients);
  // Out of quarantine on every master, as health reads it on each (an acquire's votes cannot
  // tell: its round ends at a quorum, the last master `pending`), then long enough for the known
  // value to be trusted.
  await waitUntil(async () => {
    const { masters: health } = await rl.health();
    return health.every((m) => m.reachable && !m.quarantined);
  }, 10_000);
  await waitUntil(async () => {
    const before = await Promise.all(probe.map(timeCalls));
    const lock = await rl.acquire(uniqueResource('trusted'));
    await lock.release();
    await settled(rl);
    const after = await Promise.all(probe.map(timeCalls));
    return after.every((n, i) => n === before[i]);
  }, 10_000);
  return rl;
}

it('checks a known old marker without reading the clock', async () => {
  const rl = await trustedEngine();
  const before = await Promise.all(probe.map(timeCalls));
  for (let i = 0; i < 20; i++) {
    const lock = await rl.acquire(uniqueResource('no-time'), { ttl: 1000 });
    expect(lock.votes.filter((v) => v.outcome === 'quarantined')).toEqual([]);
    await lock.release();
  }
  await settled(rl);
  expect(await Promise.all(probe.map(timeCalls))).toEqual(before);
});

it('still quarantines a master flushed under a live connection, on the next acquire', async () => {
  const rl = await trustedEngine();
  await probe[0].flushall();
  // Rounds decide at a quorum: collect master 0's votes until it answered in time.
  const seen: string[] = [];
  await waitUntil(async () => {
    const lock = await rl.acquire(uniqueResource('flushed'), { ttl: 1000 });
    await lock.release();
    const v0 = lock.votes[0];
    if (v0.outcome !== 'pending') seen.push(v0.outcome);
    return seen.length >= 3;
  }, 10_000);
  // Its marker was re-seeded by the first acquire after the flush: young, votes do not count.
  expect(seen).toEqual(['quarantined', 'quarantined', 'quarantined']);
});

it('re-learns a marker that moved to another old value, and stops reading the clock again', async () => {
  const rl = await trustedEngine();
  const marker = `${rl.settings.keyPrefix}boot`;
  // Another old value (as another process's post-connect check could leave it).
  const old = String(Date.now() - 60_000);
  await probe[1].set(marker, old);
  let before = await timeCalls(probe[1]);
  const lock = await rl.acquire(uniqueResource('moved'), { ttl: 1000 });
  await lock.release();
  await settled(rl);
  expect(await timeCalls(probe[1])).toBeGreaterThan(before); // the full check ran
  // After the background re-read, the new value is trusted: no clock reads any more.
  await waitUntil(async () => {
    before = await timeCalls(probe[1]);
    const l = await rl.acquire(uniqueResource('moved'), { ttl: 1000 });
    await l.release();
    await settled(rl);
    return (await timeCalls(probe[1])) === before;
  }, 5000);
  expect(await probe[1].get(marker)).toBe(old);
});
