import { get as httpGet } from 'node:http';
import type { ClientRequest } from 'node:http';
import type { Redis } from 'ioredis';
import request from 'supertest';
import type { SampleApp } from '../../sample/app.module';
import type { Order } from '../../sample/orders/order.model';
import type { Charge } from '../../sample/orders/payment.gateway';
import type { RedisMasters } from '../harness/redis-masters';
import {
  PLATFORMS,
  bootSample,
  fenceKey,
  holdersOf,
  lockKey,
  startMasters,
  uid,
  waitUntil,
} from './helpers';

/**
 * The sample shop's HTTP locks on 5 real masters, over Express and Fastify. Mutual exclusion
 * (REDLOCK.md, "Properties we promise" 1) seen from the outside: no double charge, no lost
 * stock update; and no lock left behind whatever way a handler ends.
 */
let masters: RedisMasters;
let clients: Redis[];

beforeAll(async () => {
  ({ masters, clients } = await startMasters(5));
});

afterAll(async () => {
  await masters?.stop();
});

describe.each(PLATFORMS)('sample shop over HTTP (%s)', (platform) => {
  let sample: SampleApp;

  beforeAll(async () => {
    sample = await bootSample({
      platform,
      // Masters started by this suite: no lock can predate them, so the restart quarantine
      // (tested in quorum.spec.ts) has nothing to protect here. Most handlers here make one
      // attempt (423 when contended): with the default 50 ms per-master timeout, one event-loop
      // stall of a loaded machine during it turned a reader's 200 into a 503 (flake check,
      // 1 run in 14). No test here is about timeouts (faults: quorum.spec.ts).
      redlock: { clients: masters.urls, quarantine: false, requestTimeout: 250 },
    });
  });

  afterAll(async () => {
    await sample?.close();
  });

  const http = () => request(sample.url);

  async function newOrder(available = 10): Promise<Order> {
    const sku = uid('sku-');
    await http().put(`/stock/${sku}`).send({ available }).expect(200);
    return (await http().post('/orders').send({ sku }).expect(201)).body as Order;
  }

  it('payments of an order being paid get 423 with Retry-After: one charge', async () => {
    const order = await newOrder();
    const first = http()
      .post(`/orders/${order.id}/pay`)
      .then((r) => r);
    await waitUntil(async () => (await holdersOf(clients, `order:${order.id}`)) >= 3, 2000);
    const others = await Promise.all(
      Array.from({ length: 3 }, () => http().post(`/orders/${order.id}/pay`)),
    );
    for (const r of others) {
      expect(r.status).toBe(423);
      expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(r.body).toMatchObject({
        statusCode: 423,
        error: 'Locked',
        resources: [`order:${order.id}`],
      });
    }
    expect((await first).status).toBe(201);
    const charges = (await http().get(`/orders/${order.id}/charges`).expect(200)).body;
    expect(charges).toHaveLength(1);
  });

  it('an order for an empty sku is a 400 from the @Locked provider method, not a 500', async () => {
    const res = await http().post('/orders').send({ sku: '' });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ statusCode: 400 });
  });

  it('concurrent reservations of one product wait their turn: no oversell, no lost update', async () => {
    const sku = uid('sku-');
    await http().put(`/stock/${sku}`).send({ available: 5 }).expect(200);
    const results = await Promise.all(
      Array.from({ length: 8 }, () => http().post('/orders').send({ sku, qty: 1 })),
    );
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([201, 201, 201, 201, 201, 409, 409, 409]);
    expect((await http().get(`/stock/${sku}`).expect(200)).body).toEqual({ sku, available: 0 });
  });

  it('payments of different orders run in parallel', async () => {
    const orders = await Promise.all([newOrder(), newOrder(), newOrder()]);
    const results = await Promise.all(orders.map((o) => http().post(`/orders/${o.id}/pay`)));
    expect(results.map((r) => r.status)).toEqual([201, 201, 201]);
    const charges = await Promise.all(
      orders.map(async (o) => {
        const list = (await http().get(`/orders/${o.id}/charges`).expect(200)).body as Charge[];
        expect(list).toHaveLength(1);
        return list[0];
      }),
    );
    // Every charge started before any of them finished: they overlapped in time.
    const lastStart = Math.max(...charges.map((c) => c.startedAt));
    const firstEnd = Math.min(...charges.map((c) => c.at));
    expect(lastStart).toBeLessThan(firstEnd);
  });

  it('a handler that throws leaves no lock behind', async () => {
    const id = uid('missing-');
    // The counter serves every resource of the slot (it may exist already): compare its values.
    const counters = () => Promise.all(clients.map((c) => c.get(fenceKey(`order:${id}`))));
    const before = await counters();
    const res = await http().post(`/orders/${id}/pay`).expect(404);
    expect(res.body.message).toMatch(/not found/);
    // The handler did run under the lock (the fencing counter was raised on a majority) ...
    const after = await counters();
    const raised = after.filter((v, i) => v !== null && Number(v) > Number(before[i] ?? 0));
    expect(raised.length).toBeGreaterThanOrEqual(3);
    // ... and the lock is gone well before its 10 s ttl (auto-extension would keep it forever).
    await waitUntil(async () => (await holdersOf(clients, `order:${id}`)) === 0, 2000, 'release');
  });

  it('an SSE client that disconnects leaves no lock behind', async () => {
    const order = await newOrder();
    const stream = openEventStream(`${sample.url}/orders/${order.id}/fulfilment`);
    try {
      const first = await stream.firstEvent;
      expect(first).toContain('"step":"picking"');
      expect(await holdersOf(clients, `order:${order.id}`)).toBeGreaterThanOrEqual(3);
    } finally {
      stream.request.destroy();
    }
    // The stream had three more one-second steps to go: only the unsubscription can release.
    await waitUntil(
      async () => (await holdersOf(clients, `order:${order.id}`)) === 0,
      1500,
      'release after disconnect',
    );
    await http().post(`/orders/${order.id}/pay`).expect(201);
  });

  it('a nested locked call on the same resource re-enters the lock', async () => {
    const order = await newOrder(10);
    const res = await http().post(`/orders/${order.id}/cancel`).expect(201);
    expect(res.body).toMatchObject({ reentered: true, order: { status: 'cancelled' } });
    expect(res.body.fencingToken).toEqual(expect.any(Number));
    expect((await http().get(`/stock/${order.sku}`).expect(200)).body.available).toBe(10);
    // Released as the response completes, at a majority: the last masters may come later.
    await waitUntil(
      async () => (await holdersOf(clients, `order:${order.id}`)) === 0,
      2000,
      'release',
    );
  });

  it('a long job under using() outlives its ttl by automatic extension; a second run gets 409', async () => {
    const name = uid('report-');
    const [first, second] = await Promise.all([
      http().post(`/reports/${name}`),
      new Promise((r) => setTimeout(r, 100)).then(() => http().post(`/reports/${name}`)),
    ]);
    expect(first.status).toBe(201);
    expect(first.body.durationMs).toBeGreaterThanOrEqual(3 * first.body.lockTtlMs);
    expect(first.body.extensions).toBeGreaterThanOrEqual(2);
    expect(first.body.signalAborted).toBe(false);
    expect(second.status).toBe(409);
    // using() released before the response, at a majority (3 of 5); the other masters' deletes
    // may still be on their way. (Polled only after that: the 600 ms ttl would soon expire.)
    expect(await holdersOf(clients, `report:${name}`)).toBeLessThanOrEqual(2);
    await waitUntil(
      async () => (await holdersOf(clients, `report:${name}`)) === 0,
      2000,
      'release',
    );
  });

  it('reads a report under a shared lock: readers together, 423 while it is being generated', async () => {
    const name = uid('report-');
    await http().get(`/reports/${name}`).expect(404);
    const generating = http()
      .post(`/reports/${name}`)
      .then((r) => r); // sent now (supertest sends on then)
    await waitUntil(async () => (await holdersOf(clients, `report:${name}`)) >= 3, 2000);
    const during = await http().get(`/reports/${name}`);
    const generated = await generating;
    // While the generator holds the plain lock, readers get 423. On a loaded machine its 400 ms
    // lock may be lost midway (the run then stops with 503, and a reader may get in: 404);
    // never a reader while the generator still held a valid lock.
    expect([201, 503]).toContain(generated.status);
    if (generated.status === 201) expect(during.status).toBe(423);
    else expect([423, 404]).toContain(during.status);
    if (generated.status !== 201) await http().post(`/reports/${name}`).expect(201);
    const reads = await Promise.all(
      Array.from({ length: 5 }, () => http().get(`/reports/${name}`)),
    );
    expect(reads.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(reads[0].body.report).toBe(name);
    expect(await holdersOf(clients, `report:${name}`)).toBe(0);
  });

  it('exports under a semaphore of 2: never more than 2 at once, the others wait their turn', async () => {
    const key = lockKey('reports:exports');
    let most = 0;
    let polling = true;
    const poll = (async () => {
      while (polling) {
        const sizes = await Promise.all(clients.map((c) => c.zcard(key).catch(() => 0)));
        most = Math.max(most, ...sizes.map((n) => Math.max(0, n - 1))); // minus the kind marker
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    const results = await Promise.all(
      Array.from({ length: 5 }, (_, i) => http().post(`/reports/${uid('x-')}${i}/export`)),
    );
    polling = false;
    await poll;
    expect(results.map((r) => r.status)).toEqual([201, 201, 201, 201, 201]);
    expect(most).toBe(2);
    expect(await holdersOf(clients, 'reports:exports')).toBe(0);
  });
});

/** Opens a server-sent events stream; `firstEvent` resolves with the first `data:` line. */
function openEventStream(url: string): { request: ClientRequest; firstEvent: Promise<string> } {
  let req!: ClientRequest;
  const firstEvent = new Promise<string>((resolve, reject) => {
    req = httpGet(url, { headers: { accept: 'text/event-stream' } }, (res) => {
      if (res.statusCode !== 200) reject(new Error(`SSE status ${res.statusCode}`));
      let buffer = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buffer += chunk;
        const line = buffer.split('\n').find((l) => l.startsWith('data:'));
        if (line) resolve(line);
      });
      res.on('error', () => undefined);
    });
    req.on('error', (err) => reject(err));
  });
  firstEvent.catch(() => undefined);
  return { request: req, firstEvent };
}
