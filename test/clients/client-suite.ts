/**
 * The engine's guarantees on one client library, against real masters: the shared suite that
 * every `*.spec.ts` of this folder runs for its client kind (test/harness/client-kinds.ts) —
 * locks and contention, extension and loss, lock kinds, fencing, the restart quarantine (which
 * rests on the client's connection events), the self-healing extension, release wake-ups across
 * processes (pub/sub), killed / paused / restarted masters, hostile input and secrets, and a
 * real one-node Redis Cluster. Probes (keys looked at directly) stay on ioredis.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Redis } from 'ioredis';
import { InvalidArgumentError, KindMismatchError, NoQuorumError } from '../../lib/core/base/errors';
import type { Lock } from '../../lib/core/lock/lock';
import { Redlock } from '../../lib/core/redlock';
import type { RedlockClient, RedlockSettings } from '../../lib/core/base/settings';
import { fencedRead, fencedWrite } from '../../lib/core/redis/fenced-write';
import type { ClientKind } from '../harness/client-kinds';
import { makeClients, makeClusterClient } from '../harness/client-kinds';
import { LocalCluster, RedisMasters } from '../harness/redis-masters';
import { recordingLogger, sleep, uniqueResource, valuesOn, waitUntil } from '../harness/util';

const BASE: RedlockSettings = {
  quarantine: false,
  retryDelay: 20,
  retryJitter: 10,
  requestTimeout: 250,
  logger: { warn: () => undefined },
};

/**
 * `waiter` (an engine of its own, retrying only every 5 s) waits for `r`, which `held` holds; the
 * release must wake it through the masters' announcement, long before its next retry.
 */
async function wokenByRelease(held: Lock, waiter: Redlock, r: string): Promise<void> {
  // The waiter's subscription is live before the release (it watches while it waits).
  const waiting = waiter.acquire(r, { waitTimeout: 4000 });
  await sleep(300);
  const released = performance.now();
  await held.release();
  const lock = await waiting;
  expect(performance.now() - released).toBeLessThan(3000);
  await lock.release();
}

/** Registers the shared suite for `kind`. */
export function clientSuite(kind: ClientKind): void {
  let masters: RedisMasters;
  let probe: Redis[];
  const closers: (() => Promise<void>)[] = [];

  /** One client of `kind` per master (closed after the file). */
  async function clients(): Promise<RedlockClient[]> {
    const made = await makeClients(
      kind,
      masters.masters.map((m) => m.port),
    );
    closers.push(made.close);
    return made.clients as RedlockClient[];
  }

  /**
   * Waits until every master holds `lock`'s key: a lock is granted at a quorum, and the last
   * master's answer may still be on its way.
   */
  async function heldEverywhere(rl: Redlock, r: string, lock: Lock): Promise<void> {
    await waitUntil(async () =>
      (await valuesOn(probe, rl.keyOf(r))).every((v) => v === lock.value),
    );
  }

  /** An engine over new clients of `kind` (closed after the file, before its clients). */
  async function engine(settings: RedlockSettings = {}): Promise<Redlock> {
    const rl = new Redlock(await clients(), { ...BASE, ...settings });
    closers.unshift(() => rl.close());
    return rl;
  }

  beforeAll(async () => {
    masters = await RedisMasters.start(3);
    probe = masters.createClients();
    await RedisMasters.ready(probe);
  });

  afterAll(async () => {
    for (const close of closers.splice(0)) await close();
    await masters?.stop();
  });

  describe(`${kind.name}: locks`, () => {
    it('acquires, refuses a contender, extends, releases; fencing tokens grow', async () => {
      const rl = await engine();
      const r = uniqueResource('basic');
      const lock = await rl.acquire(r, { ttl: 2000 });
      await heldEverywhere(rl, r, lock);
      expect(await rl.tryAcquire(r)).toBeNull();
      const pttl = await probe[0].pttl(rl.keyOf(r));
      await lock.extend(10_000);
      expect(await probe[0].pttl(rl.keyOf(r))).toBeGreaterThan(pttl);
      const first = lock.fencingToken as number;
      await lock.release();
      expect(await valuesOn(probe, rl.keyOf(r))).toEqual([null, null, null]);
      const next = await rl.acquire(r);
      expect(next.fencingToken).toBeGreaterThan(first);
      await next.release();
    });

    it('tells the holder when its lock is lost (keys deleted behind its back)', async () => {
      const rl = await engine();
      const r = uniqueResource('lost');
      const lock = await rl.acquire(r, { ttl: 2000 });
      await heldEverywhere(rl, r, lock);
      await Promise.all(probe.slice(0, 2).map((p) => p.del(rl.keyOf(r))));
      await expect(lock.extend(2000)).rejects.toThrow();
      expect(lock.signal.aborted).toBe(true);
    });

    it('lock kinds: readers share, a writer waits for them, a semaphore admits its limit', async () => {
      const rl = await engine();
      const r = uniqueResource('rw');
      const a = await rl.acquire(r, { shared: true });
      const b = await rl.acquire(r, { shared: true });
      expect(await rl.tryAcquire(r)).toBeNull();
      await a.release();
      await b.release();
      const w = await rl.acquire(r);
      await w.release();

      const s = uniqueResource('sem');
      const held = [await rl.acquire(s, { limit: 2 }), await rl.acquire(s, { limit: 2 })];
      expect(await rl.tryAcquire(s, { limit: 2 })).toBeNull();
      await expect(rl.tryAcquire(s)).rejects.toBeInstanceOf(KindMismatchError);
      await Promise.all(held.map((l) => l.release()));
    });

    it('fencedWrite / fencedRead through this client: an older token is refused', async () => {
      const [store] = await clients();
      const key = uniqueResource('fenced');
      expect(await fencedWrite(store, key, 5, 'five')).toBe(true);
      expect(await fencedWrite(store, key, 4, 'four')).toBe(false);
      expect(await fencedRead(store, key)).toEqual({ value: 'five', fencingToken: 5 });
    });
  });

  describe(`${kind.name}: release wake-ups`, () => {
    it('a waiter in another process is woken by the release, long before its next retry', async () => {
      const holderEngine = await engine();
      const waiterEngine = await engine({ retryDelay: 5000, retryJitter: 0 });
      const r = uniqueResource('wake');
      await wokenByRelease(await holderEngine.acquire(r, { ttl: 20_000 }), waiterEngine, r);
    });
  });

  describe(`${kind.name}: faults`, () => {
    it('a killed master votes "error" at once; the others still lock; it comes back', async () => {
      const rl = await engine({ retryCount: 0 });
      await masters.masters[0].kill();
      try {
        const lock = await rl.acquire(uniqueResource('killed'));
        await lock.release();
        await masters.masters[1].kill();
        const err = (await rl.tryAcquire(uniqueResource('none')).catch((e: unknown) => e)) as
          NoQuorumError | undefined;
        expect(err).toBeInstanceOf(NoQuorumError);
        expect(err?.votes?.filter((v) => v.outcome === 'error')).toHaveLength(2);
      } finally {
        await masters.masters[0].start();
        await masters.masters[1].start();
      }
      await RedisMasters.ready(probe);
      await waitUntil(async () => (await rl.health()).usable === 3, 10_000);
      const lock = await rl.acquire(uniqueResource('back'));
      await lock.release();
    });

    it('a paused master costs at most the request timeout', async () => {
      const rl = await engine({ requestTimeout: 200 });
      await rl.acquire(uniqueResource('warm')).then((l) => l.release());
      masters.masters[2].pause();
      try {
        const start = performance.now();
        const lock = await rl.acquire(uniqueResource('paused'));
        expect(performance.now() - start).toBeLessThan(2000);
        await lock.release();
      } finally {
        masters.masters[2].resume();
      }
    });
  });

  describe(`${kind.name}: restart quarantine and the self-healing extension`, () => {
    it('a master restarted empty is quarantined; a held lock gets its key back there', async () => {
      const logger = recordingLogger();
      const rl = await engine({ ttl: 1000, maxTtl: 1000, quarantine: { duration: 1500 }, logger });
      await waitUntil(async () => (await rl.health()).usable === 3, 10_000);
      const r = uniqueResource('heal');
      let lock: Lock | undefined;
      let finish!: () => void;
      const done = new Promise<void>((resolve) => (finish = resolve));
      const using = rl.using(
        r,
        async (signal, l) => {
          lock = l;
          await done;
          return signal.aborted;
        },
        { ttl: 1000 },
      );
      try {
        await waitUntil(() => lock !== undefined);
        const held = lock as Lock;
        const notices = logger.messages.length;
        await masters.masters[2].restart();
        await RedisMasters.ready(probe);
        // The post-connect check (on the client's `ready` event) found the master new and said so.
        const port = String(masters.masters[2].port);
        await waitUntil(
          () =>
            logger.messages.slice(notices).some((m) => m.includes(port) && /quarantine/.test(m)),
          5000,
        );
        expect((await rl.health()).masters[2].quarantined).toBe(true);
        await waitUntil(async () => {
          const h = await rl.health();
          return h.masters[2].reachable && !h.masters[2].quarantined;
        }, 10_000);
        const seen = held.extensions;
        await waitUntil(() => held.signal.aborted || held.extensions >= seen + 2, 5000);
        expect(held.signal.aborted).toBe(false);
        expect((await valuesOn(probe, rl.keyOf(r)))[2]).toBe(held.value);
        // The check read INFO (uptime, run_id) through this client: no fallback to the marker.
        expect(logger.messages.filter((m) => /could not check/.test(m))).toEqual([]);
      } finally {
        finish();
        await using;
      }
    });
  });

  describe(`${kind.name}: hostile input and secrets`, () => {
    it('odd resource names lock as themselves; bad input is a typed error', async () => {
      const rl = await engine();
      for (const r of ['{slot}:x', 'line\nbreak', 'ünïcødé 🔒', ' ']) {
        const lock = await rl.acquire(r);
        // Granted at a quorum (2 of 3): the third answer may still be on its way.
        const held = (await valuesOn(probe, rl.keyOf(r))).filter((v) => v === lock.value);
        expect(held.length).toBeGreaterThanOrEqual(2);
        await lock.release();
      }
      await expect(rl.acquire('')).rejects.toBeInstanceOf(InvalidArgumentError);
      await expect(rl.acquire('x', { ttl: -1 })).rejects.toBeInstanceOf(InvalidArgumentError);
    });

    it('a wrong password never shows in errors, health or logs', async () => {
      const secret = 'S3c#r/e?t@pw';
      const locked = await RedisMasters.start(1, { extraArgs: ['--requirepass', 'right-one'] });
      try {
        const made = await makeClients(kind, [locked.masters[0].port], { password: secret });
        closers.push(made.close);
        const logger = recordingLogger();
        const rl = new Redlock(made.clients as RedlockClient[], { ...BASE, retryCount: 0, logger });
        closers.unshift(() => rl.close());
        const err = await rl.acquire(uniqueResource('secret')).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(NoQuorumError);
        const texts = [String(err), JSON.stringify(await rl.health()), ...logger.messages];
        for (const text of texts) expect(text).not.toContain(secret);
      } finally {
        await locked.stop();
      }
    });
  });

  describe(`${kind.name}: a one-node Redis Cluster`, () => {
    let cluster: LocalCluster;
    /** Engines first, then clients: all closed before the Cluster stops. */
    const clusterClosers: (() => Promise<void>)[] = [];
    beforeAll(async () => {
      cluster = await LocalCluster.start(1);
    });
    afterAll(async () => {
      for (const close of clusterClosers.splice(0)) await close();
      await cluster?.stop();
    });

    it('locks, fences and wakes a waiter of another engine', async () => {
      const port = cluster.nodes[0].port;
      const a = await makeClusterClient(kind, port);
      const b = await makeClusterClient(kind, port);
      clusterClosers.push(a.close, b.close);
      const holder = new Redlock([a.client as RedlockClient], BASE);
      const waiter = new Redlock([b.client as RedlockClient], {
        ...BASE,
        retryDelay: 5000,
        retryJitter: 0,
      });
      clusterClosers.unshift(
        () => holder.close(),
        () => waiter.close(),
      );
      const r = uniqueResource('cluster');
      const lock = await holder.acquire(r, { ttl: 20_000 });
      expect(await fencedWrite(a.client as RedlockClient, `${r}:data`, 1, 'one')).toBe(true);
      await wokenByRelease(lock, waiter, r);
    });
  });
}
