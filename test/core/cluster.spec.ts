/**
 * A Redis Cluster as one of the Redlock masters. Lock keys are `prefix{resource}`, so each
 * resource's lock and fencing keys share a hash slot; a multi-resource lock is split per slot on
 * a Cluster master (one all-or-nothing script per slot), so it never fails with CROSSSLOT.
 */
import { Cluster } from 'ioredis';
import type { Redis } from 'ioredis';
import { LockContendedError, Redlock } from '../../lib';
import { keySlot } from '../../lib/core/slots';
import { LocalCluster, RedisMasters } from '../harness/redis-masters';
import { uniqueResource, waitUntil } from '../harness/util';

let cluster: LocalCluster;
let masters: RedisMasters;
let clusterClient: Cluster;
let standalone: Redis[];
let rl: Redlock;

beforeAll(async () => {
  [cluster, masters] = await Promise.all([LocalCluster.start(3), RedisMasters.start(2)]);
  clusterClient = new Cluster(cluster.seeds, {
    enableOfflineQueue: true,
    redisOptions: { maxRetriesPerRequest: 1 },
  });
  clusterClient.on('error', () => undefined);
  standalone = masters.createClients();
  await RedisMasters.ready(standalone);
  await waitUntil(() => clusterClient.status === 'ready', 20_000);
  // quorum 3 of 3: every master, the Cluster included, must vote yes.
  rl = new Redlock([clusterClient, ...standalone], {
    quarantine: false,
    requestTimeout: 200,
    quorum: 3,
  });
});

afterAll(async () => {
  await rl?.close();
  clusterClient.disconnect();
  await masters.stop();
  await cluster.stop();
});

it('locks several resources in different slots on a Cluster master without CROSSSLOT', async () => {
  const resources = Array.from({ length: 6 }, (_, i) => uniqueResource(`multi${i}`));
  expect(new Set(resources.map((r) => keySlot(rl.keyOf(r)))).size).toBeGreaterThan(1);
  const lock = await rl.acquire(resources);
  expect(lock.votes[0].outcome).toBe('ok'); // the Cluster master voted yes
  const values = await Promise.all(resources.map((r) => clusterClient.get(rl.keyOf(r))));
  expect(values).toEqual(Array(6).fill(lock.value));
  for (const r of resources) expect(lock.fencingTokens[r]).toBeGreaterThan(0);

  // All-or-nothing: one resource held elsewhere makes the whole multi-resource lock contended.
  const error = await rl
    .acquire([resources[2], uniqueResource('other')], { retryCount: 0 })
    .catch((e: unknown) => e);
  expect(error).toBeInstanceOf(LockContendedError);

  await lock.extend(5000);
  const released = await lock.release();
  expect(released.votes[0].outcome).toBe('ok');
  const after = await Promise.all(resources.map((r) => clusterClient.get(rl.keyOf(r))));
  expect(after).toEqual(Array(6).fill(null));
});
