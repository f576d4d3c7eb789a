import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { TestingModule } from '@nestjs/testing';
import request from 'supertest';
import { LockLostError, RedlockModule, RedlockService } from '../../../lib';
import {
  InMemoryRedlock,
  RedlockTestingController,
  RedlockTestingModule,
} from '../../../lib/testing';
import { SampleModule } from '../../../sample/app.module';
import { ReservationsJanitor } from '../../../sample/jobs/reservations.janitor';
import type { Order } from '../../../sample/orders/order.model';

/**
 * RedlockTestingModule swapped into the sample app (no Redis anywhere): the app's own
 * providers, handlers and `@Locked()` methods run unchanged against the in-memory engine.
 */
describe('RedlockTestingModule in the sample app', () => {
  let moduleRef: TestingModule;
  let app: INestApplication;
  let locks: RedlockTestingController;
  let n = 0;

  beforeAll(async () => {
    const shop = {
      store: 'memory',
      scheduler: false,
      // reportTtlMs 600: an extension a third of the ttl before expiry has 200 ms to run; with
      // 300 a timer 100 ms late on a loaded machine lost the lock (flake check: 503)
      timings: { paymentMs: 100, stockWriteMs: 1, reportTtlMs: 600, reportMs: 1800 },
    };
    // The app's real lock module, with a master that does not exist: it must never be used.
    const realLocks = RedlockModule.forRoot({ clients: ['redis://127.0.0.1:1'] });
    moduleRef = await Test.createTestingModule({
      imports: [SampleModule.register({ ...shop, redlockModule: realLocks })],
    })
      // Nest matches module overrides by reference: override the very object the app imports.
      .overrideModule(realLocks)
      .useModule(RedlockTestingModule.forRoot({ ttl: 5000 }))
      .compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    locks = moduleRef.get(RedlockTestingController);
  });

  afterEach(() => locks.reset());

  afterAll(async () => {
    await app?.close();
  });

  async function newOrder(): Promise<Order> {
    const sku = `sku-${++n}`;
    await request(app.getHttpServer()).put(`/stock/${sku}`).send({ available: 10 }).expect(200);
    const res = await request(app.getHttpServer()).post('/orders').send({ sku }).expect(201);
    return res.body as Order;
  }

  it('provides the RedlockService token, backed by the in-memory engine', () => {
    const service = moduleRef.get(RedlockService);
    expect(service).toBeInstanceOf(RedlockService);
    expect(service.engine).toBeInstanceOf(InMemoryRedlock);
    expect(service.engine).toBe(moduleRef.get(InMemoryRedlock));
  });

  it('a resource held elsewhere makes a @Locked() handler answer 423 with Retry-After', async () => {
    const order = await newOrder();
    locks.hold(`order:${order.id}`, 3000);
    const res = await request(app.getHttpServer()).post(`/orders/${order.id}/pay`).expect(423);
    expect(res.headers['retry-after']).toBe('3');
    expect(res.body).toMatchObject({ statusCode: 423, resources: [`order:${order.id}`] });
    locks.free(`order:${order.id}`);
    await request(app.getHttpServer()).post(`/orders/${order.id}/pay`).expect(201);
  });

  it('excludes for real: concurrent payments of one order charge once', async () => {
    const order = await newOrder();
    const server = app.getHttpServer();
    const results = await Promise.all(
      [1, 2, 3].map(() => request(server).post(`/orders/${order.id}/pay`)),
    );
    expect(results.map((r) => r.status).sort()).toEqual([201, 423, 423]);
    const charges = await request(server).get(`/orders/${order.id}/charges`).expect(200);
    expect(charges.body).toHaveLength(1);
  });

  it('locks provider methods too: the @Cron job skips while its lock is held', async () => {
    const janitor = moduleRef.get(ReservationsJanitor);
    locks.hold('jobs:expire-reservations');
    await expect(janitor.expireStaleReservations()).resolves.toBeUndefined();
    locks.free('jobs:expire-reservations');
    await expect(janitor.expireStaleReservations()).resolves.toMatchObject({ expired: 0 });
  });

  it('keeps reentrancy: a nested call on the same resource completes', async () => {
    const order = await newOrder();
    const res = await request(app.getHttpServer()).post(`/orders/${order.id}/cancel`).expect(201);
    expect(res.body).toMatchObject({ reentered: true, order: { status: 'cancelled' } });
    expect(locks.heldResources()).toEqual([]);
  });

  it('setAvailable(false) turns handlers into 503 until restored', async () => {
    const order = await newOrder();
    locks.setAvailable(false);
    const res = await request(app.getHttpServer()).post(`/orders/${order.id}/pay`).expect(503);
    expect(res.body).toMatchObject({ statusCode: 503, resources: [`order:${order.id}`] });
    locks.setAvailable(true);
    await request(app.getHttpServer()).post(`/orders/${order.id}/pay`).expect(201);
  });

  it('loseLock() aborts the holder signal: the long report stops', async () => {
    const running = request(app.getHttpServer())
      .post('/reports/lost')
      .then((r) => r);
    await locks.waitUntilHeld('report:lost');
    const lost = locks.loseLock('report:lost');
    expect(lost?.signal.reason).toBeInstanceOf(LockLostError);
    const res = await running;
    expect(res.status).toBe(503);
    expect(res.body.message).toMatch(/lock was lost/);
  });

  it('a long report is extended past its ttl with its signal intact', async () => {
    const res = await request(app.getHttpServer()).post('/reports/healthy').expect(201);
    expect(res.body.extensions).toBeGreaterThanOrEqual(2);
    expect(res.body.signalAborted).toBe(false);
  });

  it('a handler that throws leaves no lock behind', async () => {
    await request(app.getHttpServer()).post('/orders/missing/pay').expect(404);
    await locks.waitUntilFree('order:missing');
    expect(locks.heldResources()).toEqual([]);
  });
});
