import type { Redis } from 'ioredis';
import request from 'supertest';
import { RedlockService } from '../../lib';
import type { SampleApp } from '../../sample/app.module';
import type { Order } from '../../sample/orders/order.model';
import { RedisMasters } from '../harness/redis-masters';
import { PLATFORMS, bootSample, holdersOf, uid, waitUntil } from './helpers';

/**
 * `GET /health` of the sample shop (@nestjs/terminus + RedlockHealthIndicator), over Express and
 * Fastify: 200 `up` with per-master details while a quorum is reachable, 503 `down` without
 * one (and 200 again once the masters are back), 503 `draining: true` while the app shuts down.
 * The masters require a password, given in the client URLs: it must never show in the answer.
 *
 * `quarantine: false`: the masters are fresh (and come back empty after a restart); the
 * restart quarantine is covered by quorum.spec.ts and test/nest/health.spec.ts.
 */
const SECRET = 'e2e-health-s3cret-pw';

interface MasterDetails {
  name: string;
  reachable: boolean;
  latency?: number;
  quarantined: boolean;
  error?: string;
}

let masters: RedisMasters;
let clients: Redis[];
let urls: string[];

beforeAll(async () => {
  masters = await RedisMasters.start(3, { extraArgs: ['--requirepass', SECRET] });
  clients = masters.createClients({ password: SECRET });
  await RedisMasters.ready(clients);
  urls = masters.masters.map((m) => `redis://:${SECRET}@127.0.0.1:${m.port}`);
});

afterEach(async () => {
  await Promise.all(masters.masters.map((m) => m.start())); // no-op for running masters
});

afterAll(async () => {
  await masters?.stop();
});

describe.each(PLATFORMS)('GET /health (%s)', (platform) => {
  let sample: SampleApp | undefined;

  afterEach(async () => {
    await sample?.close().catch(() => undefined);
    sample = undefined;
  });

  const boot = async (options: { paymentMs?: number } = {}): Promise<SampleApp> =>
    (sample = await bootSample({
      platform,
      // 250 ms per master, as in the other e2e specs: the health check PINGs every master
      // within the request timeout, and 50 ms answered 503 on a loaded machine (flake check)
      redlock: { clients: urls, quarantine: false, shutdownTimeout: 10_000, requestTimeout: 250 },
      timings: options.paymentMs ? { paymentMs: options.paymentMs } : {},
    }));

  it('answers 200 with the lock service up and every master, without the password', async () => {
    const { url } = await boot();
    const res = await request(url).get('/health');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'ok', error: {} });
    const locks = res.body.info.locks;
    expect(locks).toMatchObject({ status: 'up', quorum: 2, usable: 3 });
    expect(locks.draining).toBeUndefined();
    expect(res.body.details.locks).toEqual(locks);
    const details = locks.masters as MasterDetails[];
    expect(details).toHaveLength(3);
    details.forEach((m, i) => {
      expect(m).toMatchObject({ reachable: true, quarantined: false });
      expect(m.latency).toBeGreaterThanOrEqual(0);
      expect(m.name).toContain(`127.0.0.1:${masters.masters[i].port}`);
    });
    expect(res.text).not.toContain(SECRET);
  });

  it('answers 503 down without a quorum, and 200 again once the masters are back', async () => {
    const { url } = await boot();
    await request(url).get('/health').expect(200);

    await Promise.all([1, 2].map((i) => masters.masters[i].kill()));
    const down = await request(url).get('/health');
    expect(down.status).toBe(503);
    expect(down.body.status).toBe('error');
    const locks = down.body.error.locks;
    expect(locks).toMatchObject({ status: 'down', quorum: 2, usable: 1 });
    expect(locks.draining).toBeUndefined();
    const unreachable = (locks.masters as MasterDetails[]).filter((m) => !m.reachable);
    expect(unreachable.map((m) => m.name)).toEqual(
      [1, 2].map((i) => expect.stringContaining(`:${masters.masters[i].port}`)),
    );
    for (const m of unreachable) expect(m.error).toEqual(expect.any(String));
    expect(down.text).not.toContain(SECRET);

    await Promise.all([1, 2].map((i) => masters.masters[i].start())); // back, empty
    // 200 as soon as one of them is reachable again (2 of 3 is a quorum), then all 3 usable.
    let up: request.Response | undefined;
    await waitUntil(
      async () => {
        const res = await request(url).get('/health');
        if (res.status !== 200 && res.status !== 503)
          throw new Error(`unexpected status ${res.status}`);
        if (res.status === 200) up = res;
        return res.status === 200 && res.body.info.locks.usable === 3;
      },
      10_000,
      'health back to 200 with every master after the restart',
    );
    expect(up!.body.info.locks).toMatchObject({ status: 'up', usable: 3 });
    expect(up!.text).not.toContain(SECRET);
  });

  it('answers 503 with draining: true while the app shuts down', async () => {
    const app = await boot({ paymentMs: 1500 });
    const http = () => request(app.url);
    const sku = uid('sku-');
    await http().put(`/stock/${sku}`).send({ available: 5 }).expect(200);
    const order = (await http().post('/orders').send({ sku }).expect(201)).body as Order;
    // A running payment holds its lock: the shutdown stays in its drain phase until it is done.
    const paying = http()
      .post(`/orders/${order.id}/pay`)
      .then((r) => r);
    await waitUntil(async () => (await holdersOf(clients, `order:${order.id}`)) === 3, 2000);
    await http().get('/health').expect(200);

    const closing = app.close();
    try {
      await waitUntil(() => app.app.get(RedlockService).isShuttingDown, 2000);
      const res = await http().get('/health');
      expect(res.status).toBe(503);
      // Terminus reports its own shutdown too ('shutting_down'); the lock service says why.
      expect(res.body.status).toBe('shutting_down');
      // Every master is fine: only the shutdown makes the service unavailable.
      expect(res.body.error.locks).toMatchObject({
        status: 'down',
        draining: true,
        usable: 3,
        quorum: 2,
      });
      expect(res.text).not.toContain(SECRET);

      expect((await paying).status).toBe(201);
    } finally {
      await closing.catch(() => undefined);
      sample = undefined;
    }
    expect(await holdersOf(clients, `order:${order.id}`)).toBe(0);
  });
});
