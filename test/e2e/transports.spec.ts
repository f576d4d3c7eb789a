import type { Redis } from 'ioredis';
import { ClientProxyFactory, Transport } from '@nestjs/microservices';
import type { ClientProxy } from '@nestjs/microservices';
import { firstValueFrom } from 'rxjs';
import { io } from 'socket.io-client';
import type { Socket } from 'socket.io-client';
import request from 'supertest';
import type { SampleApp } from '../../sample/app.module';
import type { Order } from '../../sample/orders/order.model';
import { freePort } from '../harness/redis-masters';
import type { RedisMasters } from '../harness/redis-masters';
import { PLATFORMS, bootSample, holdersOf, startMasters, uid, waitUntil } from './helpers';

/**
 * `@Locked()` on a microservice handler (TCP on 127.0.0.1) and on a WebSocket gateway handler
 * (socket.io on the HTTP server): same lock, same exclusion as over HTTP; contention reaches the
 * client as the transport's error with `code: 'LOCK_CONTENDED'`.
 */
let masters: RedisMasters;
let clients: Redis[];

beforeAll(async () => {
  ({ masters, clients } = await startMasters(5));
});

afterAll(async () => {
  await masters?.stop();
});

describe.each(PLATFORMS)('microservice and gateway handlers (%s)', (platform) => {
  let sample: SampleApp;
  let rpc: ClientProxy;
  let socket: Socket;

  beforeAll(async () => {
    const microservicePort = await freePort();
    sample = await bootSample({
      platform,
      microservicePort,
      // Fresh masters of this suite: no lock predates them (quarantine is tested in quorum.spec).
      // Handlers here make one attempt: a 250 ms per-master timeout, not the default 50 ms that
      // one event-loop stall of a loaded machine can miss (as in http-locking.spec.ts).
      redlock: { clients: masters.urls, quarantine: false, requestTimeout: 250 },
    });
    rpc = ClientProxyFactory.create({
      transport: Transport.TCP,
      options: { host: '127.0.0.1', port: microservicePort },
    });
    await rpc.connect();
    socket = io(sample.url, { transports: ['websocket'], reconnection: false });
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', () => resolve());
      socket.once('connect_error', reject);
    });
  });

  afterAll(async () => {
    socket?.disconnect();
    await rpc?.close();
    await sample?.close();
  });

  async function paidOrder(): Promise<Order> {
    const http = () => request(sample.url);
    const sku = uid('sku-');
    await http().put(`/stock/${sku}`).send({ available: 10 }).expect(200);
    const order = (await http().post('/orders').send({ sku }).expect(201)).body as Order;
    await http().post(`/orders/${order.id}/pay`).expect(201);
    return order;
  }

  it('RPC: a ship message while another holds the order gets LOCK_CONTENDED (and HTTP gets 423)', async () => {
    const order = await paidOrder();
    const held = () => holdersOf(clients, `order:${order.id}`);
    const ship = () => firstValueFrom(rpc.send<Order>('orders.ship', { id: order.id }));
    const first = ship();
    first.catch(() => undefined);
    await waitUntil(async () => (await held()) >= 3, 2000, 'first ship holding the lock');
    const [refused, cancel] = await Promise.all([
      ship().then(
        () => undefined,
        (err: unknown) => err,
      ),
      request(sample.url).post(`/orders/${order.id}/cancel`),
    ]);
    expect(refused).toMatchObject({
      status: 'error',
      code: 'LOCK_CONTENDED',
      resources: [`order:${order.id}`],
      retryAfter: expect.any(Number),
    });
    expect(cancel.status).toBe(423); // one lock across transports
    expect((await first).status).toBe('shipped');
    await waitUntil(async () => (await held()) === 0, 2000, 'release');
  });

  it('WebSocket: an annotate message while another holds the order gets a LOCK_CONTENDED exception', async () => {
    const order = await paidOrder();
    const held = () => holdersOf(clients, `order:${order.id}`);
    const acks: Order[] = [];
    const exceptions: unknown[] = [];
    const onException = (e: unknown): void => void exceptions.push(e);
    socket.on('exception', onException);
    try {
      const annotate = (note: string): void =>
        void socket.emit('orders.annotate', { id: order.id, note }, (o: Order) => acks.push(o));
      annotate('first');
      await waitUntil(async () => (await held()) >= 3, 2000, 'first annotate holding the lock');
      annotate('second');
      await waitUntil(() => acks.length + exceptions.length === 2, 5000, 'both answers');
      expect(exceptions).toEqual([
        expect.objectContaining({
          status: 'error',
          code: 'LOCK_CONTENDED',
          resources: [`order:${order.id}`],
        }),
      ]);
      expect(acks).toHaveLength(1);
      expect(acks[0].notes).toEqual(['first']);
    } finally {
      socket.off('exception', onException);
    }
    await waitUntil(async () => (await held()) === 0, 2000, 'release');
  });
});
