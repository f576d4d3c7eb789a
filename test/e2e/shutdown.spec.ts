import type { Redis } from 'ioredis';
import request from 'supertest';
import { RedlockService } from '../../lib';
import type { Order } from '../../sample/orders/order.model';
import type { RedisMasters } from '../harness/redis-masters';
import { PLATFORMS, bootSample, holdersOf, startMasters, uid, waitUntil } from './helpers';

/**
 * Graceful shutdown of the sample shop (SIGTERM → `app.close()`), over Express and Fastify:
 * the app stops taking new locks at once (503, `Connection: close`), lets the payment that is
 * running finish with its lock, then releases everything and closes its clients. The lock of
 * the running payment stays valid throughout (REDLOCK.md, "Properties we promise" 1).
 */
let masters: RedisMasters;
let clients: Redis[];

beforeAll(async () => {
  ({ masters, clients } = await startMasters(3));
});

afterAll(async () => {
  await masters?.stop();
});

describe.each(PLATFORMS)('graceful shutdown (%s)', (platform) => {
  it('refuses new locked requests with 503 while the running one finishes, then releases', async () => {
    const sample = await bootSample({
      platform,
      redlock: { clients: masters.urls, quarantine: false, shutdownTimeout: 10_000 },
      timings: { paymentMs: 1500 },
    });
    let closing: Promise<void> | undefined;
    try {
      const http = () => request(sample.url);
      const orders: Order[] = [];
      for (let i = 0; i < 2; i++) {
        const sku = uid('sku-');
        await http().put(`/stock/${sku}`).send({ available: 5 }).expect(200);
        orders.push((await http().post('/orders').send({ sku }).expect(201)).body as Order);
      }
      const [paying, refused] = orders;
      const first = http()
        .post(`/orders/${paying.id}/pay`)
        .then((r) => r);
      await waitUntil(async () => (await holdersOf(clients, `order:${paying.id}`)) === 3, 2000);

      closing = sample.close();
      await waitUntil(() => sample.app.get(RedlockService).isShuttingDown, 2000);
      // The HTTP server still accepts requests while running calls drain; new locks are refused.
      const late = await http().post(`/orders/${refused.id}/pay`);
      expect(late.status).toBe(503);
      expect(late.headers.connection).toBe('close');
      expect(late.body).toMatchObject({
        statusCode: 503,
        resources: [`order:${refused.id}`],
        message: expect.stringContaining('shutting down'),
      });
      expect(await holdersOf(clients, `order:${refused.id}`)).toBe(0);

      // The running payment completes, holding its lock until the end.
      expect(await holdersOf(clients, `order:${paying.id}`)).toBe(3);
      const done = await first;
      expect(done.status).toBe(201);
      expect((done.body as Order).status).toBe('paid');
      await closing;
      expect(await holdersOf(clients, `order:${paying.id}`)).toBe(0);
    } finally {
      await (closing ?? sample.close()).catch(() => undefined);
    }
  });
});
