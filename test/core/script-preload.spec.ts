/**
 * The engine loads its scripts on every master right after it connects (redis/scripts/lua.ts,
 * loadScripts), with and without the restart-quarantine check, and again after a reconnect to a
 * master that lost them. Without that, the first call of each script on a fresh master answered
 * NOSCRIPT and sent the source one round-trip later — after whatever was written meanwhile on
 * that connection: a read sent once the release had been confirmed by the other masters found
 * the released key still on the slow one (flake check, protocols.spec "at once on durable
 * masters"). The last test reproduces that with a delay proxy in front of one master.
 */
import Redis from 'ioredis';
import { Redlock } from '../../lib/core/redlock';
import { definedScripts } from '../../lib/core/redis/scripts/lua';
import { proxiedClients } from '../harness/delay-proxy';
import { RedisMasters, closeClient } from '../harness/redis-masters';
import { useMasters } from '../harness/engines';
import { recordingLogger, uniqueResource, valuesOn, waitUntil } from '../harness/util';

const suite = useMasters(3);

/** Empties every master's script cache (a fresh master's state). */
async function flushScripts(): Promise<void> {
  await Promise.all(suite.probe.map((c) => c.script('FLUSH')));
}

/** SCRIPT EXISTS of every defined script, asked on `client` (after what it already sent). */
async function loadedOn(client: Redis): Promise<number[]> {
  const shas = definedScripts().map((s) => s.sha);
  return (await client.script('EXISTS', ...shas)) as number[];
}

const everyScript = (): number[] => definedScripts().map(() => 1);

it.each([
  ['with the restart-quarantine check', {}],
  ['without it (quarantine: false)', { quarantine: false as const }],
])('loads every script on connect, %s', async (_label, settings) => {
  await flushScripts();
  const clients = suite.masters.createClients();
  await RedisMasters.ready(clients);
  const engine = new Redlock(clients, { ...settings, logger: recordingLogger() });
  try {
    expect(definedScripts().length).toBeGreaterThanOrEqual(10);
    // Asked on the engine's own connections: after the loads, which were written at connect.
    for (const c of clients) expect(await loadedOn(c)).toEqual(everyScript());
  } finally {
    await engine.close();
    await Promise.all(clients.map((c) => closeClient(c)));
  }
});

it('loads them again after reconnecting to a master that lost them', async () => {
  const clients = suite.masters.createClients();
  await RedisMasters.ready(clients);
  const engine = new Redlock(clients, { quarantine: false });
  try {
    await (await engine.acquire(uniqueResource('preload-warm'))).release();
    await flushScripts();
    const reconnected = new Promise((resolve) => clients[0].once('ready', resolve));
    clients[0].disconnect(true); // reconnect
    await reconnected;
    expect(await loadedOn(clients[0])).toEqual(everyScript());
  } finally {
    await engine.close();
    await Promise.all(clients.map((c) => closeClient(c)));
  }
});

it('a release confirmed by a quorum is ordered before later commands on the slow master', async () => {
  await flushScripts();
  const { proxies, clients, close } = await proxiedClients(
    suite.masters.masters.map((m) => m.port),
  );
  try {
    // No quarantine wait on these fresh masters: this test is about the order of commands.
    const engine = new Redlock(clients, { quarantine: false, requestTimeout: 2000, ttl: 10_000 });
    try {
      const resource = uniqueResource('preload-order');
      const key = engine.keyOf(resource);
      const lock = await engine.acquire(resource);
      await waitUntil(
        async () => (await valuesOn(suite.probe, key)).every((v) => v !== null),
        5000,
      );
      // Replies from master 1 now take 300 ms: the release is confirmed by masters 0 and 2 first.
      proxies[1].setDelays({ down: 300 });
      const result = await lock.release();
      expect(result.deleted).toBeGreaterThanOrEqual(2);
      // Read on the engine's own connection to master 1, after the release: the key is gone.
      // With a NOSCRIPT fallback the release's EVAL would only be sent after this GET.
      expect(await clients[1].get(key)).toBeNull();
    } finally {
      await engine.close();
    }
  } finally {
    await close();
  }
});

it('any number of engines on the same clients adds one ready and one close listener per client', async () => {
  const clients = suite.masters.createClients();
  await RedisMasters.ready(clients);
  const before = [clients[0].listenerCount('ready'), clients[0].listenerCount('close')];
  const warnings: Error[] = [];
  const onWarning = (w: Error): void => void warnings.push(w);
  process.on('warning', onWarning);
  const engines = Array.from(
    { length: 12 },
    (_, i) => new Redlock(clients, { quarantine: i % 2 === 0 ? false : undefined }),
  );
  try {
    expect(clients[0].listenerCount('ready')).toBe(before[0] + 1);
    expect(clients[0].listenerCount('close')).toBe(before[1] + 1);
  } finally {
    await Promise.all(engines.map((e) => e.close()));
    process.off('warning', onWarning);
    await Promise.all(clients.map((c) => closeClient(c)));
  }
  expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
  expect([clients[0].listenerCount('ready'), clients[0].listenerCount('close')]).toEqual(before);
});
