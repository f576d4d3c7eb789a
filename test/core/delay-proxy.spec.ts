/**
 * The delaying TCP proxy of the harness (test/harness/delay-proxy.ts): adds the configured
 * latency per direction, changeable at runtime, keeps byte order, and closes cleanly (no socket,
 * no timer left, new connections refused).
 */
import Redis from 'ioredis';
import { connect } from 'node:net';
import { performance } from 'node:perf_hooks';
import { DelayProxy } from '../harness/delay-proxy';
import { RedisMasters, closeClient } from '../harness/redis-masters';
import { uniqueResource } from '../harness/util';

let masters: RedisMasters;
const opened: Redis[] = [];
const proxies: DelayProxy[] = [];

beforeAll(async () => {
  masters = await RedisMasters.start(1);
});

afterEach(async () => {
  await Promise.all(opened.splice(0).map((c) => closeClient(c)));
  await Promise.all(proxies.splice(0).map((p) => p.close()));
});

afterAll(async () => {
  await masters.stop();
});

async function proxied(delays: { up?: number; down?: number } = {}): Promise<[DelayProxy, Redis]> {
  const proxy = await DelayProxy.start(masters.masters[0].port, delays);
  proxies.push(proxy);
  const client = new Redis({ host: '127.0.0.1', port: proxy.port, maxRetriesPerRequest: 0 });
  client.on('error', () => undefined);
  opened.push(client);
  await client.ping();
  return [proxy, client];
}

async function timed(f: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await f();
  return performance.now() - t;
}

// Timers fire no earlier than asked, measured on Date.now's whole ms: allow 1 ms per hop.
const SLACK = 2;

it('adds the delay of each direction, changeable at runtime', async () => {
  const [proxy, client] = await proxied();
  proxy.setDelays({ up: 120 });
  expect(await timed(() => client.ping())).toBeGreaterThanOrEqual(120 - SLACK);
  proxy.setDelays({ up: 0, down: 90 });
  expect(await timed(() => client.ping())).toBeGreaterThanOrEqual(90 - SLACK);
  proxy.setDelays({ up: 60, down: 70 });
  expect(proxy.currentDelays).toEqual({ up: 60, down: 70 });
  expect(await timed(() => client.ping())).toBeGreaterThanOrEqual(130 - SLACK);
});

it('keeps the byte order when the delay drops while bytes are in flight', async () => {
  const [proxy, client] = await proxied({ up: 150 });
  const key = uniqueResource('order');
  const first = Array.from({ length: 20 }, () => client.incr(key));
  await new Promise((r) => setTimeout(r, 20)); // the first batch is queued in the proxy
  proxy.setDelays({ up: 0 });
  const second = Array.from({ length: 20 }, () => client.incr(key));
  const values = await Promise.all([...first, ...second]);
  expect(values).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
  await client.del(key);
});

it('two links with different delays reorder arrivals at the master', async () => {
  const [slow, a] = await proxied({ up: 150 });
  const [, b] = await proxied();
  const key = uniqueResource('race');
  const order: string[] = [];
  const pa = a.rpush(key, 'a').then(() => order.push('a'));
  await new Promise((r) => setTimeout(r, 10)); // a sent first
  const pb = b.rpush(key, 'b').then(() => order.push('b'));
  await Promise.all([pa, pb]);
  expect(await b.lrange(key, 0, -1)).toEqual(['b', 'a']); // b arrived first
  expect(order).toEqual(['b', 'a']);
  expect(slow.stats.sockets).toBe(2);
  await b.del(key);
});

it('closes cleanly: bytes in flight dropped, no socket or timer left, new connections refused', async () => {
  const [proxy, client] = await proxied();
  expect(proxy.stats.sockets).toBe(2);
  proxy.setDelays({ up: 500, down: 500 });
  const inFlight = client.ping().catch((e: unknown) => e);
  await new Promise((r) => setTimeout(r, 20));
  expect(proxy.stats.timers).toBe(1);
  const closedAt = performance.now();
  await proxy.close();
  expect(performance.now() - closedAt).toBeLessThan(500); // it did not wait for the delay
  expect(proxy.stats).toEqual({ sockets: 0, timers: 0 });
  expect(await inFlight).toBeInstanceOf(Error);
  const refused = await new Promise<string>((resolve) => {
    const s = connect(proxy.port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve('connected');
    });
    s.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
  });
  expect(refused).toBe('ECONNREFUSED');
  await proxy.close(); // idempotent
});
