/**
 * `inspect(resource)` / `isLocked(resource)` against real redis-server masters:
 * what a quorum agrees on, read-only (no write of any kind), masters down, restart quarantine,
 * holders of the other kinds written by the groundwork scripts.
 */
import type { Redis } from 'ioredis';
import { InvalidArgumentError, NoQuorumError } from '../../lib/core/base/errors';
import { SEMAPHORE_ACQUIRE_SCRIPT } from '../../lib/core/redis/kinds/semaphore-scripts';
import { SHARED_ACQUIRE_SCRIPT } from '../../lib/core/redis/kinds/shared-scripts';
import { Redlock } from '../../lib/core/redlock';
import { InMemoryRedlock } from '../../lib/testing/in-memory-redlock';
import { PREFIX, acquireLayout, run } from '../harness/kind-scripts';
import { useMasters } from '../harness/engines';
import { RedisMasters } from '../harness/redis-masters';
import { recordingLogger, uniqueResource, waitUntil } from '../harness/util';

const suite = useMasters(5, { logger: recordingLogger() });
const engine = (...args: Parameters<typeof suite.engine>): Redlock => suite.engine(...args);

describe('inspect on healthy masters', () => {
  it('reports free, held (ttl counting down), and free again after release', async () => {
    const rl = engine();
    const r = uniqueResource('inspect-basic');
    expect(await rl.inspect(r)).toEqual({ resource: r, locked: false, holders: 0, ttl: 0 });
    expect(await rl.isLocked(r)).toBe(false);
    const lock = await rl.acquire(r, { ttl: 5000 });
    await waitUntil(async () =>
      (await Promise.all(suite.probe.map((c) => c.exists(rl.keyOf(r))))).every(Boolean),
    );
    const first = await rl.inspect(r);
    expect(first).toMatchObject({ resource: r, locked: true, holders: 1 });
    expect(first.ttl).toBeGreaterThan(0);
    expect(first.ttl).toBeLessThanOrEqual(5000);
    expect(await rl.isLocked(r)).toBe(true);
    // ttl decreases as time passes (poll: no assumption about the machine's speed).
    await waitUntil(async () => (await rl.inspect(r)).ttl < first.ttl - 50);
    // Another engine over the same masters (another process) sees the same.
    expect(await engine().isLocked(r)).toBe(true);
    await lock.release();
    await waitUntil(async () => !(await rl.isLocked(r)));
    expect(await rl.inspect(r)).toEqual({ resource: r, locked: false, holders: 0, ttl: 0 });
  });

  it('states only what a quorum confirms: keys on 2 of 5 masters are not locked', async () => {
    const rl = engine();
    const r = uniqueResource('inspect-minority');
    const key = rl.keyOf(r);
    await suite.probe[0].set(key, 'someone', 'PX', 9000);
    await suite.probe[1].set(key, 'someone', 'PX', 9000);
    expect(await rl.inspect(r)).toEqual({ resource: r, locked: false, holders: 0, ttl: 0 });
    await suite.probe[2].set(key, 'someone', 'PX', 3000);
    const s = await rl.inspect(r);
    expect(s.locked).toBe(true);
    expect(s.holders).toBe(1);
    // The third-largest ttl: when the key of master 2 expires, no quorum holds it any more.
    expect(s.ttl).toBeGreaterThan(0);
    expect(s.ttl).toBeLessThanOrEqual(3000);
    await Promise.all(suite.probe.map((c) => c.del(key)));
  });

  it('counts shared readers and semaphore holders written by the kind scripts', async () => {
    const rl = engine({ keyPrefix: PREFIX });
    const shared = uniqueResource('inspect-shared');
    const sem = uniqueResource('inspect-sem');
    const read = (c: Redis, token: string, ttl: number) => {
      const { keys, args } = acquireLayout([shared], { token, ttl }, true);
      return run(c, SHARED_ACQUIRE_SCRIPT, keys, args);
    };
    const admit = (c: Redis, token: string) => {
      const { keys, args } = acquireLayout([sem], { token, ttl: 8000 }, false);
      return run(c, SEMAPHORE_ACQUIRE_SCRIPT, keys, [...args, '3']);
    };
    // Reader A on every master, reader B on 3 of 5 (a quorum), reader C on 2 only.
    for (let i = 0; i < 5; i++) {
      await read(suite.probe[i], 'readerA', 8000);
      if (i < 3) await read(suite.probe[i], 'readerB', 6000);
      if (i >= 3) await read(suite.probe[i], 'readerC', 6000);
    }
    const s = await rl.inspect(shared);
    expect(s).toMatchObject({ resource: shared, locked: true, holders: 2 });
    expect(s.ttl).toBeGreaterThan(6000);
    expect(s.ttl).toBeLessThanOrEqual(8000);
    // Semaphore (limit 3): 3 holders on masters 0..2, 1 holder elsewhere.
    for (let i = 0; i < 5; i++) {
      await admit(suite.probe[i], 'holder1');
      if (i < 3) {
        await admit(suite.probe[i], 'holder2');
        await admit(suite.probe[i], 'holder3');
      }
    }
    expect(await rl.inspect(sem)).toMatchObject({ locked: true, holders: 3 });
    // A plain lock on the resource is refused (the key holds readers): both agree.
    expect(await rl.tryAcquire(shared)).toBeNull();
    await Promise.all(suite.probe.flatMap((c) => [c.del(rl.keyOf(shared)), c.del(rl.keyOf(sem))]));
  });

  it('rejects a bad resource with a typed error before any Redis call', async () => {
    const rl = engine();
    for (const bad of [undefined, null, 42, '', ['a'], '\uD800', 'x'.repeat(1025)]) {
      await expect(rl.inspect(bad as unknown as string)).rejects.toBeInstanceOf(
        InvalidArgumentError,
      );
      await expect(rl.isLocked(bad as unknown as string)).rejects.toBeInstanceOf(
        InvalidArgumentError,
      );
    }
  });

  it('never counts as an attempt: no event is emitted', async () => {
    const rl = engine();
    const events: string[] = [];
    rl.observe((e) => events.push(e.type));
    const r = uniqueResource('inspect-events');
    await rl.inspect(r);
    const lock = await rl.acquire(r);
    await rl.inspect(r);
    await lock.release();
    expect(events).toEqual(['acquired', 'released']);
  });
});

describe('inspect is read-only', () => {
  let own: RedisMasters;
  let oc: Redis[];
  let op: Redis[];

  beforeAll(async () => {
    own = await RedisMasters.start(3);
    oc = own.createClients();
    op = own.createClients();
    await RedisMasters.ready([...oc, ...op]);
  });
  afterAll(async () => {
    await own.stop();
  });

  const dirty = (c: Redis): Promise<number> =>
    c.info('persistence').then((t) => Number(/rdb_changes_since_last_save:(\d+)/.exec(t)?.[1]));

  it('changes nothing on any master: dirty counter unchanged, boot marker not created', async () => {
    // Quarantine on: the script reads the boot marker (and must never create it).
    const rl = engine({ quarantine: { duration: 1000, trustAppendFsyncAlways: false } }, oc);
    const held = uniqueResource('ro-held');
    const free = uniqueResource('ro-free');
    // Out of quarantine first (markers seeded by the engine's post-connect check, then aged).
    await waitUntil(async () => (await rl.health()).usable === 3, 10_000);
    const lock = await rl.acquire(held, { ttl: 30_000 });
    await waitUntil(async () =>
      (await Promise.all(op.map((c) => c.exists(rl.keyOf(held))))).every(Boolean),
    );
    // Master 0 loses everything (its marker too) without reconnecting: the engine reads no
    // marker there, and inspect must not seed one.
    await op[0].flushall();
    const marker = `${rl.settings.keyPrefix}boot`;
    const before = await Promise.all(op.map(dirty));
    expect(await rl.inspect(held)).toMatchObject({ locked: true, holders: 1 });
    expect(await rl.inspect(free)).toMatchObject({ locked: false, holders: 0 });
    expect(await rl.isLocked(held)).toBe(true);
    const after = await Promise.all(op.map(dirty));
    expect(after).toEqual(before);
    expect(await op[0].exists(marker)).toBe(0);
    expect(await op[0].exists(rl.keyOf(free))).toBe(0);
    await lock.release();
  });
});

describe('inspect with faults', () => {
  let own: RedisMasters;
  let oc: Redis[];

  beforeEach(async () => {
    own = await RedisMasters.start(5);
    oc = own.createClients();
    await RedisMasters.ready(oc);
  });
  afterEach(async () => {
    await own.stop();
  });

  it('answers from the masters that answered; NoQuorumError when fewer than a quorum did', async () => {
    const rl = engine({ requestTimeout: 100 }, oc);
    const r = uniqueResource('inspect-down');
    const lock = await rl.acquire(r, { ttl: 20_000 });
    await waitUntil(async () => (await rl.inspect(r)).locked);
    await own.masters[4].kill();
    expect(await rl.inspect(r)).toMatchObject({ locked: true, holders: 1 });
    own.masters[3].pause(); // frozen: its answer never comes (per-node timeout)
    try {
      expect(await rl.isLocked(r)).toBe(true);
      await own.masters[2].kill();
      const err = await rl.inspect(r).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(NoQuorumError);
      const e = err as NoQuorumError;
      expect(e.resources).toEqual([r]);
      expect(e.quorum).toBe(3);
      expect(e.votes.map((v) => v.outcome)).toEqual(['ok', 'ok', 'error', 'timeout', 'error']);
      await expect(rl.isLocked(r)).rejects.toBeInstanceOf(NoQuorumError);
    } finally {
      own.masters[3].resume();
    }
    await lock.release().catch(() => undefined);
  });

  it('works with a master in restart quarantine; NoQuorumError when too few are outside it', async () => {
    const rl = engine(
      { requestTimeout: 200, quarantine: { duration: 1500, trustAppendFsyncAlways: false } },
      oc,
    );
    await waitUntil(async () => (await rl.health()).usable === 5, 10_000);
    const r = uniqueResource('inspect-quarantine');
    const lock = await rl.acquire(r, { ttl: 20_000 });
    await waitUntil(async () => (await rl.inspect(r)).holders === 1);
    await own.masters[0].restart(); // comes back empty: in quarantine
    await RedisMasters.ready([oc[0]]);
    await waitUntil(async () => (await rl.health()).masters[0].quarantined);
    // Four masters outside quarantine still answer: the lock is seen.
    const seen = await rl.inspect(r);
    expect(seen).toMatchObject({ locked: true, holders: 1 });
    // Two more restart: only two masters outside quarantine answer — too few to say anything,
    // although the quarantined ones answer (empty).
    await Promise.all([own.masters[1].restart(), own.masters[2].restart()]);
    await RedisMasters.ready([oc[1], oc[2]]);
    const err = await rl.inspect(r).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NoQuorumError);
    expect(
      (err as NoQuorumError).votes.filter((v) => v.outcome === 'quarantined').length,
    ).toBeGreaterThanOrEqual(2);
    await lock.release().catch(() => undefined);
  });
});

describe('inspect on the in-memory engine', () => {
  it('reports holds and locks, and NoQuorumError during a simulated outage', async () => {
    const rl = new InMemoryRedlock();
    try {
      expect(await rl.inspect('a')).toEqual({ resource: 'a', locked: false, holders: 0, ttl: 0 });
      const lock = await rl.acquire('a', { ttl: 3000 });
      const s = await rl.inspect('a');
      expect(s).toMatchObject({ locked: true, holders: 1 });
      expect(s.ttl).toBeGreaterThan(0);
      expect(s.ttl).toBeLessThanOrEqual(3000);
      await lock.release();
      expect(await rl.isLocked('a')).toBe(false);
      rl.hold('b');
      expect(await rl.inspect('b')).toEqual({ resource: 'b', locked: true, holders: 1, ttl: -1 });
      rl.setAvailable(false);
      await expect(rl.inspect('b')).rejects.toBeInstanceOf(NoQuorumError);
      await expect(rl.inspect('')).rejects.toBeInstanceOf(InvalidArgumentError);
    } finally {
      await rl.close();
    }
  });
});
