/**
 * The boot marker of restart quarantine is seeded once per master process:
 * engines that come and go never push a master that left quarantine back into it, while a
 * restart is still detected.
 */
import type { Redis } from 'ioredis';
import { Redlock } from '../../lib/core/redlock';
import type { RedlockSettings } from '../../lib/core/base/settings';
import { RedisMasters, closeClient } from '../harness/redis-masters';
import { recordingLogger, sleep, uniqueResource, valuesOn, waitUntil } from '../harness/util';

const DURATION = 1000;
const settings: RedlockSettings = {
  ttl: 500,
  maxTtl: 500,
  quarantine: { duration: DURATION },
  requestTimeout: 250,
  retryDelay: 20,
  retryJitter: 10,
};

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

/** Masters plus a long-lived engine, waited out of their first quarantine. */
async function agedMasters(
  options: { extraArgs?: string[] } = {},
  duration = DURATION,
): Promise<{
  masters: RedisMasters;
  probe: Redis[];
  rl: Redlock;
}> {
  const masters = await RedisMasters.start(3, options);
  const probe = masters.createClients();
  const rl = new Redlock(masters.createClients(), { ...settings, quarantine: { duration } });
  cleanups.push(async () => {
    await rl.close();
    await masters.stop();
  });
  await RedisMasters.ready(probe);
  // Until every master's marker (seeded by the engine's post-connect checks) is older than the
  // quarantine, as health reads it on each master. An acquire's votes cannot tell: its round ends
  // at a quorum, so the master that answers last is `pending` — and may still be in quarantine,
  // its marker seeded later than the others' (its check ran later, or its whole-second uptime
  // counted one second less): health then saw it quarantined in the test below.
  await waitUntil(async () => {
    const { masters: health } = await rl.health();
    return health.every((m) => m.reachable && !m.quarantined);
  }, duration + 10_000);
  return { masters, probe, rl };
}

it('keeps a master out of quarantine while engines come and go (the marker never moves)', async () => {
  const { masters, probe, rl } = await agedMasters();
  const marker = `${rl.settings.keyPrefix}boot`;
  const before = await valuesOn(probe, marker);
  expect(before.every((v) => v !== null)).toBe(true);
  // For over two seconds, so that the uptime's whole seconds tick under the new engines' checks
  // (they used to recompute the birth from it, moving it forward by up to a second).
  const until = Date.now() + 2500;
  let engines = 0;
  while (Date.now() < until) {
    const clients = masters.createClients();
    await RedisMasters.ready(clients);
    const fresh = new Redlock(clients, { ...settings, logger: recordingLogger() });
    try {
      const r = uniqueResource('come-and-go');
      const lock = await fresh.acquire(r);
      expect(lock.votes.filter((v) => v.outcome === 'quarantined')).toEqual([]);
      await lock.release();
      // Every master finished the new engine's check once it took a lock there.
      const second = await fresh.acquire(uniqueResource('come-and-go'));
      await waitUntil(async () =>
        (await valuesOn(probe, fresh.keyOf(second.resources[0]))).every((v) => v === second.value),
      );
      await second.release();
      expect(await valuesOn(probe, marker)).toEqual(before);
      const health = await rl.health();
      expect(health.masters.map((m) => m.quarantined)).toEqual([false, false, false]);
    } finally {
      await fresh.close();
      await Promise.all(clients.map((c) => closeClient(c)));
    }
    engines++;
    await sleep(50);
  }
  expect(engines).toBeGreaterThan(5);
  expect(await valuesOn(probe, marker)).toEqual(before);
});

it('still quarantines a master restarted with (possibly old) data: another run_id re-seeds', async () => {
  // AOF without fsync always: the data survives a restart, yet may miss the last second. A
  // quarantine of 4 s: health below must see it between the engine's reconnect (its check
  // re-seeds the marker) and its end — with 1 s, a flake check on a loaded machine once missed it.
  const { masters, probe, rl } = await agedMasters({ extraArgs: ['--appendonly', 'yes'] }, 4000);
  const marker = `${rl.settings.keyPrefix}boot`;
  await waitUntil(async () => (await probe[0].get(`${marker}:run`)) !== null);
  await sleep(1100); // appendfsync everysec: let the marker reach the disk
  const before = Number(await probe[0].get(marker));
  await masters.masters[0].restart();
  await RedisMasters.ready(probe);
  let last: unknown;
  await waitUntil(async () => {
    const health = await rl.health();
    last = health.masters[0];
    return health.masters[0].reachable && health.masters[0].quarantined;
  }, 10_000).catch((err: Error) => {
    throw new Error(`${err.message}; master 0's last health: ${JSON.stringify(last)}`);
  });
  expect(Number(await probe[0].get(marker))).toBeGreaterThan(before);
});

it('quarantines a master flushed before an engine first checked it, however long its process has run', async () => {
  // FLUSHALL on a running master loses its locks now and leaves no trace of when (the marker and
  // the run_id record go with it). An engine whose post-connect check is the first to find the
  // marker missing must date the new data set from now, not from the server process's start:
  // dated from the start, a master up longer than the quarantine was trusted at once (seen as a
  // granted acquire with two of three masters flushed a moment before).
  const { masters, probe } = await agedMasters();
  const uptime = async (): Promise<number> =>
    Number(/uptime_in_seconds:(\d+)/.exec(await probe[1].info('server'))?.[1]);
  // Older than the quarantine by more than the check's rounding (a second off the uptime).
  await waitUntil(async () => (await uptime()) * 1000 >= DURATION + 2000, 10_000);
  const [sec] = await probe[1].time();
  const flushedAt = Number(sec) * 1000;
  await probe[1].flushall();
  const clients = masters.createClients();
  await RedisMasters.ready(clients);
  // A quarantine far longer than the test (a loaded machine may stall it for a second): the
  // other masters' markers, a few seconds old, keep it from locking, which does not matter here.
  const fresh = new Redlock(clients, {
    ...settings,
    quarantine: { duration: 60_000 },
    logger: recordingLogger(),
  });
  cleanups.push(async () => {
    await fresh.close();
    await Promise.all(clients.map((c) => closeClient(c)));
  });
  // Its first attempt starts every master's check, which seeds the missing marker.
  const lock = await fresh.tryAcquire(uniqueResource('flushed-first')).catch(() => null);
  await lock?.release();
  const marker = `${fresh.settings.keyPrefix}boot`;
  await waitUntil(async () => (await probe[1].get(marker)) !== null);
  expect(Number(await probe[1].get(marker))).toBeGreaterThanOrEqual(flushedAt);
  const health = await fresh.health();
  expect(health.masters[1]).toMatchObject({ reachable: true, quarantined: true });
});

it('quarantines masters for a key prefix they never held, however long they have run', async () => {
  // The boot marker lives under the key prefix: a prefix new to the masters (a new application,
  // a changed keyPrefix) finds no marker, which looks exactly like a flush, and waits out the
  // quarantine once — while engines of the prefix already in use stay trusted.
  const { masters, probe, rl } = await agedMasters();
  const uptime = async (): Promise<number> =>
    Number(/uptime_in_seconds:(\d+)/.exec(await probe[0].info('server'))?.[1]);
  await waitUntil(async () => (await uptime()) * 1000 >= DURATION + 2000, 10_000);
  const clients = masters.createClients();
  await RedisMasters.ready(clients);
  const logger = recordingLogger();
  const other = new Redlock(clients, {
    ...settings,
    keyPrefix: `${uniqueResource('prefix')}:`,
    quarantine: { duration: 60_000 },
    logger,
  });
  cleanups.push(async () => {
    await other.close();
    await Promise.all(clients.map((c) => closeClient(c)));
  });
  // Its first attempt starts every master's check, which seeds the prefix's marker.
  const lock = await other.tryAcquire(uniqueResource('new-prefix')).catch(() => null);
  expect(lock).toBeNull();
  const marker = `${other.settings.keyPrefix}boot`;
  await waitUntil(async () => (await valuesOn(probe, marker)).every((v) => v !== null));
  const health = await other.health();
  expect(health.masters.map((m) => m.quarantined)).toEqual([true, true, true]);
  expect((await rl.health()).masters.map((m) => m.quarantined)).toEqual([false, false, false]);
  // The operator is told why, the new prefix included.
  await waitUntil(async () => logger.messages.some((m) => m.includes('key prefix new to it')));
});
