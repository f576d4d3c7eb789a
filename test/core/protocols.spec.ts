/**
 * The engine on both Redis protocols: ioredis 6 speaks RESP3 by default (and can map RESP3
 * replies to their own shapes with `replyMapping: 'resp3'`), ioredis 5 speaks RESP2. This suite
 * runs in the main projects (ioredis 6) and in the `ioredis5` project; it checks which protocol
 * the connections really use and that every reply the engine reads is understood: script
 * replies (acquire, extend, release, fencing), INFO and CONFIG (restart quarantine), and
 * pub/sub on the hand-off subscriber (in RESP3, push messages on a connection that can still
 * run commands).
 */
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { Redis, RedisOptions } from 'ioredis';
import { Redlock } from '../../lib/core/redlock';
import { RedisMasters } from '../harness/redis-masters';
import { uniqueResource, valuesOn } from '../harness/util';

// Resolved through jest's module map, so that the ioredis5 project sees ioredis 5's manifest.
const { version } = createRequire(join(process.cwd(), 'index.js'))('ioredis/package.json') as {
  version: string;
};
const major = Number(version.split('.')[0]);

let masters: RedisMasters;

beforeAll(async () => {
  // Durable masters: the engine trusts them at once, but only if it reads CONFIG GET right.
  masters = await RedisMasters.start(3, { appendFsyncAlways: true });
});
afterAll(() => masters.stop());

/** The `resp=` field of `CLIENT INFO` for this connection. */
async function protocolOf(client: Redis): Promise<number> {
  const info = String(await client.call('CLIENT', 'INFO'));
  return Number(/\bresp=(\d)/.exec(info)?.[1]);
}

const variants: [string, RedisOptions, number][] =
  major >= 6
    ? [
        ['RESP3 (ioredis 6 default)', {}, 3],
        ['RESP3 with replyMapping resp3', { protocol: 3, replyMapping: 'resp3' }, 3],
        ['RESP2 (protocol: 2)', { protocol: 2 }, 2],
      ]
    : [['RESP2 (ioredis 5)', {}, 2]];

describe.each(variants)('ioredis %s', (_label, options, resp) => {
  let clients: Redis[];
  let engine: Redlock;
  beforeAll(async () => {
    clients = masters.createClients(options);
    await RedisMasters.ready(clients);
    engine = new Redlock(clients, {
      ttl: 2000,
      maxTtl: 2000,
      retryDelay: 1000,
      retryJitter: 0,
      // Every write on these masters waits for an fsync: beside a busy disk that takes longer
      // than the default 50 ms, and a single attempt (retryCount: 0) then ends in NoQuorumError.
      requestTimeout: 500,
    });
  });
  afterAll(() => engine.close());

  it(`really speaks RESP${resp}`, async () => {
    for (const c of clients) expect(await protocolOf(c)).toBe(resp);
  });

  it('acquires, extends and releases, with increasing fencing tokens, at once on durable masters', async () => {
    const resource = uniqueResource('proto');
    // No quarantine wait: the durable masters were recognized from CONFIG GET.
    const first = await engine.acquire(resource, { retryCount: 0 });
    expect(first.votes.filter((v) => v.outcome === 'ok').length).toBeGreaterThanOrEqual(2);
    const held = await valuesOn(clients, engine.keyOf(resource));
    expect(held.filter((v) => v === first.value).length).toBeGreaterThanOrEqual(2);
    await first.extend(2000);
    expect(first.isValid).toBe(true);
    await first.release();
    expect(await valuesOn(clients, engine.keyOf(resource))).toEqual([null, null, null]);
    const second = await engine.acquire(resource, { retryCount: 0 });
    expect(second.fencingToken).toBeGreaterThan(first.fencingToken!);
    await second.release();
  });

  it('wakes a waiter through the hand-off subscriber when the holder releases', async () => {
    const resource = uniqueResource('proto-handoff');
    const holder = await engine.acquire(resource);
    const started = Date.now();
    // retryDelay is 1 s: only the release message can wake the waiter much earlier.
    const waiting = engine.acquire(resource, { retryCount: 3 });
    await new Promise((r) => setTimeout(r, 100));
    await holder.release();
    const next = await waiting;
    expect(Date.now() - started).toBeLessThan(900);
    await next.release();
  });
});
