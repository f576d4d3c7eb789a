/**
 * The plain path (the default, `fairness: 'local'`): what a plain lock writes on real masters —
 * its lock key, its fencing counter, the boot marker, and the readers' writer-waiting flag;
 * nothing of the hand-over across processes (poll marks, the order, parks, alive channels) —
 * and which scripts it runs. Also the acquire scripts' refused path that finds no key refusing
 * any more (readers expired between the SET NX and the prune).
 */
import type { Redis } from 'ioredis';
import { randomBytes } from 'node:crypto';
import { InvalidConfigurationError, KindMismatchError } from '../../lib/core/base/errors';
import { orderKey, parkKey, pollKey } from '../../lib/core/fair/fair-keys';
import { lockKey } from '../../lib/core/base/keys';
import { ACQUIRE_SCRIPT } from '../../lib/core/redis/kinds/mutex';
import { RELEASE_SCRIPT } from '../../lib/core/redis/scripts/release';
import { FAIR_ACQUIRE_SCRIPT } from '../../lib/core/fair/acquire-script';
import { FAIR_RELEASE_SCRIPT } from '../../lib/core/fair/release-script';
import { ACQUIRE_AMONG_KINDS_SCRIPT } from '../../lib/core/redis/kinds/mutex-among-kinds';
import type { LuaScript } from '../../lib/core/redis/scripts/lua';
import { Redlock } from '../../lib/core/redlock';
import { FAIR_DEFAULTS, useMasters } from '../harness/engines';
import { acquireLayout, key, run } from '../harness/kind-scripts';
import { sleep, uniqueResource, waitUntil } from '../harness/util';

const suite = useMasters(3, { keyPrefix: 'plain:' });

/** Every key under `prefix` on every master. */
async function keysOf(probe: Redis[], prefix: string): Promise<string[]> {
  const all = await Promise.all(probe.map((c) => c.keys(`${prefix}*`)));
  return [...new Set(all.flat())].sort();
}

/** Counts the EVALSHA calls of each script that `clients` send while `run` runs. */
async function scriptsSent(
  clients: Redis[],
  scripts: readonly LuaScript[],
  body: () => Promise<void>,
): Promise<Map<string, number>> {
  const counts = new Map(scripts.map((s) => [s.name, 0]));
  const restore = clients.map((c) => {
    const evalsha = c.evalsha.bind(c);
    (c as unknown as { evalsha: (...a: unknown[]) => unknown }).evalsha = (...a: unknown[]) => {
      const s = scripts.find((x) => x.sha === a[0]);
      if (s) counts.set(s.name, (counts.get(s.name) ?? 0) + 1);
      return (evalsha as (...b: unknown[]) => unknown)(...a);
    };
    return () => {
      (c as unknown as { evalsha: unknown }).evalsha = evalsha;
    };
  });
  try {
    await body();
  } finally {
    for (const r of restore) r();
  }
  return counts;
}

const SCRIPTS = [
  ACQUIRE_SCRIPT,
  ACQUIRE_AMONG_KINDS_SCRIPT,
  RELEASE_SCRIPT,
  FAIR_ACQUIRE_SCRIPT,
  FAIR_RELEASE_SCRIPT,
];

describe('a contended plain lock in the default mode', () => {
  it('writes nothing of the hand-over across processes and runs only the plain scripts', async () => {
    const rl = suite.engine({ retryDelay: 10, retryJitter: 5, retryCount: 1000 });
    const other = suite.engine({ retryDelay: 10, retryJitter: 5, retryCount: 1000 });
    const r = uniqueResource('plain');
    const counts = await scriptsSent(suite.clients, SCRIPTS, async () => {
      const held = await rl.acquire(r, { ttl: 5_000 });
      const waiting = other.acquire(r, { ttl: 5_000 });
      // Refused at least once by the holder (the waiter sleeps until its release).
      await waitUntil(async () => (await keysOf(suite.probe, 'plain:')).length > 0, 5_000);
      await sleep(50);
      expect(await keysOf(suite.probe, pollKey('plain:', r))).toEqual([]);
      expect(await keysOf(suite.probe, orderKey('plain:', r))).toEqual([]);
      expect(await keysOf(suite.probe, parkKey('plain:', r))).toEqual([]);
      await held.release();
      await (await waiting).release();
    });
    expect(counts.get('acquire')).toBeGreaterThanOrEqual(2 * suite.clients.length);
    expect(counts.get('acquire-among-kinds')).toBe(0);
    expect(counts.get('release')).toBeGreaterThanOrEqual(2);
    expect(counts.get('fair-acquire')).toBe(0);
    expect(counts.get('fair-release')).toBe(0);
    // No alive channel subscribed (the hand-over across processes' liveness check).
    const channels = await suite.probe[0].pubsub('CHANNELS', 'plain:alive:*');
    expect(channels).toEqual([]);
  });

  it('with fairness across processes, a refused retrying attempt raises its poll mark (the fair script)', async () => {
    const holder = suite.engine(FAIR_DEFAULTS);
    const waiter = suite.engine({ ...FAIR_DEFAULTS, retryDelay: 10, retryJitter: 5 });
    const r = uniqueResource('fair');
    const held = await holder.acquire(r, { ttl: 5_000 });
    const counts = await scriptsSent(suite.clients, SCRIPTS, async () => {
      const waiting = waiter.acquire(r, { ttl: 5_000, retryCount: 1000 });
      await waitUntil(
        async () => (await keysOf(suite.probe, pollKey('plain:', r))).length > 0,
        5_000,
      );
      await held.release();
      await (await waiting).release();
    });
    expect(counts.get('fair-acquire')).toBeGreaterThanOrEqual(1);
  });
});

describe('the fairness setting', () => {
  it('accepts local and across-processes, and refuses anything else with a typed error', () => {
    for (const fairness of ['local', 'across-processes'] as const) {
      const rl = suite.engine({ fairness });
      expect(rl.settings.fairness).toBe(fairness);
    }
    expect(suite.engine().settings.fairness).toBe('local');
    const bad = (): Redlock =>
      new Redlock(suite.clients, { fairness: 'fair' as unknown as 'local' });
    expect(bad).toThrow(InvalidConfigurationError);
    expect(bad).toThrow(/fairness.*'local' or 'across-processes'/);
  });
});

describe("the acquire scripts' refused path, when no key refuses any more", () => {
  /** A reader set whose only reader expired while the key itself still lives. */
  async function expiredReaders(c: Redis, k: string): Promise<void> {
    await c.zadd(k, '+inf', '#shared', '1', 'gone-reader');
    await c.pexpire(k, 10_000);
  }
  const tok = (): string => randomBytes(16).toString('base64url');

  for (const s of [ACQUIRE_AMONG_KINDS_SCRIPT, FAIR_ACQUIRE_SCRIPT]) {
    for (const n of [1, 2]) {
      it(`${s.name}, ${n} resource(s): sets every key it grants`, async () => {
        const c = suite.probe[0];
        const resources = Array.from({ length: n }, (_, i) => uniqueResource(`fall-${i}`));
        await expiredReaders(c, key(resources[0]));
        const token = tok();
        const { keys, args } = acquireLayout(resources, { token, ttl: 5_000 }, false);
        const reply = (await run(c, s, keys, args)) as unknown[];
        expect(reply[0]).toBe(1);
        for (const r of resources) {
          expect(await c.get(key(r))).toBe(token);
          expect(await c.pttl(key(r))).toBeGreaterThan(4_000);
        }
        await c.del(...resources.map(key));
      });
    }
  }
});

describe('a plain lock that meets another type at a key', () => {
  const tok = (): string => randomBytes(16).toString('base64url');

  it('ACQUIRE_SCRIPT answers {-3, age} and writes nothing, for one key and for several', async () => {
    const c = suite.probe[0];
    for (const n of [1, 2]) {
      const resources = Array.from({ length: n }, (_, i) => uniqueResource(`other-${i}`));
      const last = key(resources[n - 1]);
      await c.zadd(last, '+inf', '#shared', '1', 'gone-reader');
      await c.pexpire(last, 10_000);
      const { keys, args } = acquireLayout(resources, { token: tok(), ttl: 5_000 }, false);
      expect(await run(c, ACQUIRE_SCRIPT, keys, args)).toEqual([-3, -1]);
      for (const r of resources.slice(0, -1)) expect(await c.exists(key(r))).toBe(0);
      expect(await c.type(last)).toBe('zset');
      await c.del(...resources.map(key));
    }
  });

  it('the engine asks again among the kinds on that master: granted over expired readers, a kind mismatch over a semaphore', async () => {
    const rl = suite.engine({ retryCount: 0 });
    const r = uniqueResource('other-engine');
    await Promise.all(
      suite.probe.map(async (c) => {
        await c.zadd(lockKey('plain:', r), '+inf', '#shared', '1', 'gone-reader');
        await c.pexpire(lockKey('plain:', r), 10_000);
      }),
    );
    const counts = await scriptsSent(suite.clients, SCRIPTS, async () => {
      const lock = await rl.acquire(r, { ttl: 5_000 });
      // Every master gets it while the lock is held (a master still pending at the verdict too).
      await waitUntil(
        async () =>
          (await Promise.all(suite.probe.map((c) => c.type(lockKey('plain:', r))))).every(
            (t) => t === 'string',
          ),
        5_000,
      );
      await lock.release();
    });
    expect(counts.get('acquire-among-kinds')).toBe(suite.clients.length);
    const sem = uniqueResource('other-sem');
    const held = await rl.acquire(sem, { limit: 2, ttl: 5_000 });
    await expect(rl.tryAcquire(sem, { ttl: 5_000 })).rejects.toThrow(KindMismatchError);
    await held.release();
  });
});
