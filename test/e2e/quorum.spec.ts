import type { Redis } from 'ioredis';
import request from 'supertest';
import type { SampleApp } from '../../sample/app.module';
import type { Order } from '../../sample/orders/order.model';
import type { RedisMasters } from '../harness/redis-masters';
import { PLATFORMS, bootSample, holdersOf, startMasters, uid, waitUntil } from './helpers';

/**
 * Fault tolerance (REDLOCK.md, "Properties we promise" 3, and "Crash recovery"): with 5 masters
 * the app keeps locking while 2 are down, answers 503 while 3 are down, and after the 3 come
 * back *empty* it only trusts them once their restart quarantine has passed.
 *
 * Quarantine setting: the default (on), with `maxTtl` shrunk to 2 s so that the default
 * quarantine (maxTtl × (1 + driftFactor) + 2 ms = 2022 ms) is short. A restarted master lost the
 * keys it held; until every lock it may have held has expired (at most maxTtl), its vote could
 * hand out a resource a survivor-minority still thinks is locked. With `quarantine: false` the
 * app would accept votes from the empty masters at once — the assertion on the recovery time
 * below is what would catch that. As the masters of this suite are fresh too, the suite first
 * waits out that same quarantine once.
 */
const MAX_TTL = 2000;
const QUARANTINE_MS = Math.ceil(MAX_TTL * 1.01) + 2;

describe.each(PLATFORMS)('quorum over 5 masters (%s)', (platform) => {
  let masters: RedisMasters;
  let clients: Redis[];
  let sample: SampleApp;

  beforeAll(async () => {
    ({ masters, clients } = await startMasters(5));
    sample = await bootSample({
      platform,
      redlock: { clients: masters.urls, ttl: 1000, maxTtl: MAX_TTL },
    });
    // Fresh masters are quarantined for QUARANTINE_MS: wait until a lock can be taken.
    await waitUntil(
      async () =>
        (await request(sample.url).put('/stock/warmup').send({ available: 1 })).ok &&
        (await request(sample.url).post('/orders').send({ sku: 'warmup' })).status === 201,
      15_000,
      'first lock after the startup quarantine',
    );
  });

  afterEach(async () => {
    await Promise.all(masters.masters.map((m) => m.start())); // no-op for running masters
  });

  afterAll(async () => {
    await sample?.close();
    for (const c of clients ?? []) c.disconnect();
    await masters?.stop();
  });

  const http = () => request(sample.url);

  async function newOrder(): Promise<Order> {
    const sku = uid('sku-');
    await http().put(`/stock/${sku}`).send({ available: 10 }).expect(200);
    return (await http().post('/orders').send({ sku }).expect(201)).body as Order;
  }

  it('keeps locking with 2 of 5 masters down', async () => {
    await masters.masters[3].kill();
    await masters.masters[4].kill();
    const order = await newOrder(); // stock lock, onLocked: 'wait'
    // order lock, onLocked: 'throw': granted by the 3 survivors, and still exclusive
    const first = http()
      .post(`/orders/${order.id}/pay`)
      .then((r) => r);
    await waitUntil(async () => (await holdersOf(clients, `order:${order.id}`)) === 3, 2000);
    const second = await http().post(`/orders/${order.id}/pay`);
    expect(second.status).toBe(423);
    expect((await first).status).toBe(201);
    expect((await http().get(`/orders/${order.id}/charges`).expect(200)).body).toHaveLength(1);
  });

  it('answers 503 with 3 of 5 down, and recovers only after the restarted masters are trusted', async () => {
    const order = await newOrder();
    await Promise.all([2, 3, 4].map((i) => masters.masters[i].kill()));

    const down = await http().post(`/orders/${order.id}/pay`);
    expect(down.status).toBe(503);
    expect(down.body).toMatchObject({
      statusCode: 503,
      error: 'Service Unavailable',
      resources: [`order:${order.id}`],
    });
    expect(down.body.message).toMatch(/too few Redis masters/);

    const restartedAt = Date.now();
    await Promise.all([2, 3, 4].map((i) => masters.masters[i].start())); // back, but empty
    let status = 0;
    await waitUntil(
      async () => {
        status = (await http().post(`/orders/${order.id}/pay`)).status;
        if (status !== 201 && status !== 503) throw new Error(`unexpected status ${status}`);
        return status === 201;
      },
      15_000,
      'recovery after restart',
    );
    // 2 survivors are not a quorum: success needed a restarted master, whose vote only counts
    // once it has been up for the whole quarantine.
    expect(Date.now() - restartedAt).toBeGreaterThanOrEqual(QUARANTINE_MS - 100);
    expect((await http().get(`/orders/${order.id}/charges`).expect(200)).body).toHaveLength(1);
  });
});
