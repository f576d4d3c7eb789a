import type { Redis } from 'ioredis';
import request from 'supertest';
import type { SampleApp } from '../../sample/app.module';
import type { JanitorRun } from '../../sample/jobs/reservations.janitor';
import type { Order } from '../../sample/orders/order.model';
import { RedisMasters } from '../harness/redis-masters';
import { bootSample, holdersOf, startMasters, uid, waitUntil } from './helpers';

/**
 * Two instances of the sample app (one on Express, one on Fastify) against the same 5 masters
 * and the same data store: the situation distributed locks exist for.
 */
// Every second, so that several ticks fit in the test. Read when the sample is loaded
// (dynamically, by bootSample).
const previousCron = process.env.SAMPLE_JANITOR_CRON;
process.env.SAMPLE_JANITOR_CRON = '* * * * * *';

describe('two app instances on the same masters', () => {
  let masters: RedisMasters;
  let clients: Redis[];
  let data: RedisMasters;
  let a: SampleApp;
  let b: SampleApp;

  beforeAll(async () => {
    ({ masters, clients } = await startMasters(5));
    data = await RedisMasters.start(1);
    const shared = {
      // Fresh masters: no lock can predate them (quarantine is tested in quorum.spec.ts).
      // Handlers make one attempt: a 250 ms per-master timeout, not the default 50 ms that one
      // event-loop stall of a loaded machine can miss (as in http-locking.spec.ts).
      redlock: { clients: masters.urls, quarantine: false, requestTimeout: 250 },
      store: data.urls[0],
      namespace: `${uid('multi-')}:`,
      scheduler: true,
      timings: { reservationTtlMs: 1500 },
    };
    [a, b] = await Promise.all([
      bootSample({ ...shared, platform: 'express', instanceId: 'a' }),
      bootSample({ ...shared, platform: 'fastify', instanceId: 'b' }),
    ]);
  });

  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await Promise.all([masters?.stop(), data?.stop()]);
    if (previousCron === undefined) delete process.env.SAMPLE_JANITOR_CRON;
    else process.env.SAMPLE_JANITOR_CRON = previousCron;
  });

  it('an order being paid on one instance is locked on the other', async () => {
    const sku = uid('sku-');
    await request(a.url).put(`/stock/${sku}`).send({ available: 3 }).expect(200);
    const order = (await request(b.url).post('/orders').send({ sku }).expect(201)).body as Order;
    const first = request(a.url)
      .post(`/orders/${order.id}/pay`)
      .then((r) => r);
    await waitUntil(async () => (await holdersOf(clients, `order:${order.id}`)) >= 3, 2000);
    await request(b.url).post(`/orders/${order.id}/pay`).expect(423);
    expect((await first).status).toBe(201);
    const charges = (await request(b.url).get(`/orders/${order.id}/charges`).expect(200)).body;
    expect(charges).toEqual([expect.objectContaining({ instance: 'a' })]);
  });

  it('reservations made on both instances never oversell the shared stock', async () => {
    const sku = uid('sku-');
    await request(a.url).put(`/stock/${sku}`).send({ available: 4 }).expect(200);
    const results = await Promise.all(
      [a, b, a, b, a, b].map((app) => request(app.url).post('/orders').send({ sku })),
    );
    expect(results.map((r) => r.status).sort()).toEqual([201, 201, 201, 201, 409, 409]);
    expect((await request(b.url).get(`/stock/${sku}`).expect(200)).body.available).toBe(0);
  });

  it('the @Cron janitor runs on exactly one instance per tick, and expires stale reservations', async () => {
    const sku = uid('sku-');
    await request(a.url).put(`/stock/${sku}`).send({ available: 5 }).expect(200);
    const order = (await request(a.url).post('/orders').send({ sku, qty: 2 }).expect(201))
      .body as Order;

    const runs = async (): Promise<JanitorRun[]> =>
      (await request(a.url).get('/jobs/janitor/runs').expect(200)).body as JanitorRun[];
    const ticks = async (): Promise<number> => new Set((await runs()).map((r) => r.tick)).size;
    const expired = async (): Promise<boolean> =>
      ((await request(b.url).get(`/orders/${order.id}`).expect(200)).body as Order).status ===
      'expired';
    await waitUntil(async () => (await ticks()) >= 4 && (await expired()), 10_000, '4 ticks');

    const byTick = new Map<number, string[]>();
    for (const run of await runs()) {
      byTick.set(run.tick, [...(byTick.get(run.tick) ?? []), run.instance]);
    }
    for (const [tick, instances] of byTick) {
      expect({ tick, instances: instances.length }).toEqual({ tick, instances: 1 });
    }
    // expired once: the stock was given back once (5 − 2 + 2), not twice
    expect((await request(b.url).get(`/stock/${sku}`).expect(200)).body.available).toBe(5);
  });
});
