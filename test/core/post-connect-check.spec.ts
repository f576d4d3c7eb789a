/**
 * The post-connect check of each master (restart quarantine's readiness gate): a write decided before a master's check finished still reaches that master, and a
 * master that cannot be reached is voted `error` at once, as without quarantine.
 */
import Redis from 'ioredis';
import type { Redis as RedisClient } from 'ioredis';
import { NoQuorumError } from '../../lib/core/base/errors';
import { Redlock } from '../../lib/core/redlock';
import type { RedlockSettings } from '../../lib/core/base/settings';
import { RedisMasters, closeClient, freePort } from '../harness/redis-masters';
import { recordingLogger, uniqueResource, valuesOn, waitUntil } from '../harness/util';

let masters: RedisMasters;
let clients: RedisClient[];
let probe: RedisClient[];

// The repro: maxTtl 10 s, ttl 5 s. A short quarantine lets the fresh masters age quickly.
const settings: RedlockSettings = {
  maxTtl: 10_000,
  quarantine: { duration: 1000 },
  requestTimeout: 250,
  retryDelay: 20,
  retryJitter: 10,
};

beforeAll(async () => {
  masters = await RedisMasters.start(3);
  clients = masters.createClients();
  probe = masters.createClients();
  await RedisMasters.ready([...clients, ...probe]);
  // Out of quarantine: a lock can be taken with a quorum of counted votes.
  const warmup = new Redlock(clients, settings);
  try {
    await waitUntil(async () => {
      const lock = await warmup.tryAcquire(uniqueResource('warmup')).catch(() => null);
      await lock?.release();
      return lock !== null;
    }, 10_000);
  } finally {
    await warmup.close();
  }
});

afterAll(async () => {
  await masters.stop();
});

/** Resolves once every master holds `value` under `key` (read through separate connections). */
function onEveryMaster(key: string, value: string | null): Promise<void> {
  return waitUntil(async () => (await valuesOn(probe, key)).every((v) => v === value), 3000);
}

describe('a write decided before a master finished its post-connect check', () => {
  it('reaches every master on the first acquire of fresh engines', async () => {
    for (let i = 0; i < 40; i++) {
      const rl = new Redlock(clients, settings); // its checks start now, the acquire right after
      try {
        const r = uniqueResource('fresh');
        const lock = await rl.acquire(r, { ttl: 5000 });
        await onEveryMaster(rl.keyOf(r), lock.value);
        await lock.extend(5000);
        const pttls = await Promise.all(probe.map((c) => c.pttl(rl.keyOf(r))));
        expect(pttls.every((t) => t > 0)).toBe(true);
        await lock.release();
        await onEveryMaster(rl.keyOf(r), null);
      } finally {
        await rl.close();
      }
    }
  });

  it('reaches a master whose connection was just re-established', async () => {
    const own = masters.createClients();
    await RedisMasters.ready(own);
    const rl = new Redlock(own, settings);
    try {
      for (let i = 0; i < 10; i++) {
        const id = (await own[2].client('ID')) as number;
        await probe[2].client('KILL', 'ID', String(id));
        await waitUntil(() => own[2].status !== 'ready', 3000);
        await waitUntil(() => own[2].status === 'ready', 3000);
        const r = uniqueResource('reconnect');
        const lock = await rl.acquire(r, { ttl: 5000 });
        await onEveryMaster(rl.keyOf(r), lock.value);
        await lock.release();
        await onEveryMaster(rl.keyOf(r), null);
      }
    } finally {
      await rl.close();
      await Promise.all(own.map((c) => closeClient(c)));
    }
  });

  it('is dropped when the attempt failed or the lock was released first: no orphan key', async () => {
    for (let i = 0; i < 10; i++) {
      const rl = new Redlock(clients, settings);
      try {
        // Contended: masters 0 and 1 hold r for someone else; master 2 may still be checked
        // when they answer. Its SET (if sent at all) must be undone by the clean-up.
        const contended = uniqueResource('contended');
        const key = rl.keyOf(contended);
        await Promise.all(probe.slice(0, 2).map((c) => c.set(key, 'someone-else', 'PX', 10_000)));
        expect(await rl.tryAcquire(contended)).toBeNull();
        // Released at once, maybe before master 2 was checked.
        const released = uniqueResource('released');
        const lock = await rl.acquire(released, { ttl: 5000 });
        await lock.release();
        // Barrier: a later lock reaching master 2 went out after anything queued for the two
        // above (same connection, in order).
        const barrier = uniqueResource('barrier');
        const last = await rl.acquire(barrier, { ttl: 5000 });
        await onEveryMaster(rl.keyOf(barrier), last.value);
        expect(await probe[2].get(key)).toBeNull();
        expect(await probe[2].get(rl.keyOf(released))).toBeNull();
        await last.release();
        await Promise.all(probe.map((c) => c.del(key)));
      } finally {
        await rl.close();
      }
    }
  });
});

describe('a master that cannot be reached', () => {
  /** The repro: one master whose port has nothing listening. */
  async function voteOnDownMaster(quarantine: boolean): Promise<NoQuorumError> {
    const port = await freePort();
    // disconnectTimeout: ioredis arms a timer of that length on every disconnect(), even of a
    // client whose socket is already gone, and never clears it: the default 2 s timer kept the
    // jest worker alive after this file ("A worker process has failed to exit gracefully").
    const client = new Redis({
      port,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      disconnectTimeout: 100,
    });
    client.on('error', () => undefined);
    const rl = new Redlock([client], {
      quarantine,
      requestTimeout: 1000, // a `timeout` vote would take a whole second
      logger: recordingLogger(),
    });
    try {
      return (await rl
        .acquire(uniqueResource('down'), { retryCount: 0 })
        .catch((e: unknown) => e)) as NoQuorumError;
    } finally {
      await rl.close();
      await closeClient(client);
    }
  }

  it('is voted `error` with the connection error at once, as with quarantine off', async () => {
    const without = await voteOnDownMaster(false);
    const withQuarantine = await voteOnDownMaster(true);
    for (const error of [without, withQuarantine]) {
      expect(error).toBeInstanceOf(NoQuorumError);
      expect(error.votes[0].outcome).toBe('error');
      expect(error.votes[0].error).toBe('Connection is closed.');
      expect(error.votes[0].latency).toBeLessThan(500);
    }
  });

  it('is voted `error` at once when killed masters refuse the reconnect', async () => {
    const set = await RedisMasters.start(3);
    const own = set.createClients(); // no offline queue: "Stream isn't writeable ..."
    try {
      await RedisMasters.ready(own);
      const rl = new Redlock(own, { ...settings, quarantine: { duration: 0 } });
      try {
        await Promise.all([set.masters[1].kill(), set.masters[2].kill()]);
        await waitUntil(() => own[1].status !== 'ready' && own[2].status !== 'ready', 3000);
        const t0 = Date.now();
        const failed = (await rl
          .acquire(uniqueResource('two-down'), { retryCount: 0 })
          .catch((e: unknown) => e)) as NoQuorumError;
        const elapsed = Date.now() - t0;
        expect(failed).toBeInstanceOf(NoQuorumError);
        for (const vote of failed.votes.slice(1)) {
          expect(vote.outcome).toBe('error');
          expect(vote.error).toMatch(/writeable|closed/i);
        }
        expect(elapsed).toBeLessThan(250); // the request timeout: no vote waited for it
      } finally {
        await rl.close();
      }
    } finally {
      await set.stop();
    }
  });
});
