/**
 * Lock errors thrown anywhere while a request is handled answer like `@Locked()` on the handler
 * (LockErrorFilter, registered by the module): a `@Locked` provider method, a
 * `RedlockService.acquire()` in a handler, no quorum — over Express and Fastify against real
 * masters; and the same payloads over RPC and WebSockets. With `exceptionFilter: false` they are
 * Nest's plain 500 again.
 */
import 'reflect-metadata';
import { Body, Controller, Injectable, Module, Param, Post } from '@nestjs/common';
import type { ArgumentsHost, INestApplication } from '@nestjs/common';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { lastValueFrom, isObservable } from 'rxjs';
import request from 'supertest';
import {
  LockContendedError,
  LockErrorFilter,
  Locked,
  NoQuorumError,
  Redlock,
  RedlockModule,
  RedlockService,
} from '../../lib';
import type { Lock, LockErrorPayload, RedlockModuleOptions } from '../../lib';
import { loadTransportExceptions } from '../../lib/errors/transport.error';
import { normalizeOptions } from '../../lib/options';
import { RedisMasters, freePort } from '../harness/redis-masters';
import { uniqueResource } from '../harness/util';

@Injectable()
class Stock {
  @Locked('stock:{args.0}')
  async take(sku: string): Promise<string> {
    return sku;
  }
}

@Controller()
class ShopController {
  constructor(
    private readonly stock: Stock,
    private readonly redlock: RedlockService,
  ) {}

  @Post('take')
  take(@Body() body: { sku: string }): Promise<string> {
    return this.stock.take(body.sku);
  }

  @Post('acquire/:resource')
  async acquire(@Param('resource') resource: string): Promise<{ ok: true }> {
    const lock = await this.redlock.acquire(resource, { retryCount: 0 });
    await lock.release();
    return { ok: true };
  }
}

let masters: RedisMasters;
let outsider: Redlock;

beforeAll(async () => {
  masters = await RedisMasters.start(3);
  // Generous per-node timeouts and retries: these tests are about the answers, not about speed,
  // and must hold on a busy machine.
  outsider = new Redlock(masters.createClients(), { quarantine: false, requestTimeout: 250 });
});
afterAll(async () => {
  await outsider?.close();
  await masters?.stop();
});

async function boot(
  platform: 'express' | 'fastify',
  options: Partial<RedlockModuleOptions> & { exceptionFilter?: boolean } = {},
): Promise<INestApplication> {
  const { exceptionFilter, ...rest } = options;
  @Module({
    imports: [
      RedlockModule.forRoot({
        clients: masters.urls,
        quarantine: false,
        retryCount: 0,
        requestTimeout: 250,
        ...rest,
        ...(exceptionFilter === undefined ? {} : { exceptionFilter }),
      }),
    ],
    controllers: [ShopController],
    providers: [Stock],
  })
  class AppModule {}
  const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
  const app =
    platform === 'fastify'
      ? moduleRef.createNestApplication(new FastifyAdapter())
      : moduleRef.createNestApplication();
  await app.init();
  if (platform === 'fastify') await app.getHttpAdapter().getInstance().ready();
  return app;
}

describe.each(['express', 'fastify'] as const)('lock errors in a request (%s)', (platform) => {
  let app: INestApplication;
  beforeAll(async () => {
    app = await boot(platform);
  });
  afterAll(() => app?.close());

  it('contention in a @Locked provider method called by a route: 423 with Retry-After', async () => {
    const sku = uniqueResource('sku');
    const held = await outsider.acquire(`stock:${sku}`, { ttl: 5000 });
    try {
      const res = await request(app.getHttpServer()).post('/take').send({ sku });
      expect(res.status).toBe(423);
      expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(res.body).toMatchObject({ statusCode: 423, resources: [`stock:${sku}`] });
    } finally {
      await held.release();
    }
    await request(app.getHttpServer()).post('/take').send({ sku }).expect(201);
  });

  it('an empty template value in a provider method: 400 naming the problem', async () => {
    const res = await request(app.getHttpServer()).post('/take').send({ sku: '' });
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(/args\.0/);
  });

  it('RedlockService.acquire() on a held resource inside a handler: 423', async () => {
    const resource = uniqueResource('svc');
    const held: Lock = await outsider.acquire(resource, { ttl: 5000 });
    try {
      const res = await request(app.getHttpServer()).post(`/acquire/${resource}`);
      expect(res.status).toBe(423);
      expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    } finally {
      await held.release();
    }
  });

  it('no quorum inside a handler: 503 with Retry-After', async () => {
    const dead = await Promise.all([freePort(), freePort()]);
    const down = await boot(platform, {
      clients: [masters.urls[0], ...dead.map((p) => `redis://127.0.0.1:${p}`)],
    });
    try {
      const res = await request(down.getHttpServer()).post(`/acquire/${uniqueResource('nq')}`);
      expect(res.status).toBe(503);
      expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(res.body).toMatchObject({ statusCode: 503, error: 'Service Unavailable' });
    } finally {
      await down.close();
    }
  });

  it('exceptionFilter: false leaves the mapping to the application (Nest answers 500)', async () => {
    const plain = await boot(platform, { exceptionFilter: false });
    try {
      const sku = uniqueResource('sku');
      const held = await outsider.acquire(`stock:${sku}`, { ttl: 5000 });
      try {
        await request(plain.getHttpServer()).post('/take').send({ sku }).expect(500);
      } finally {
        await held.release();
      }
    } finally {
      await plain.close();
    }
  });
});

describe('lock errors over RPC and WebSockets', () => {
  const filter = new LockErrorFilter(normalizeOptions({ clients: ['redis://127.0.0.1:1'] }));
  const contended = new LockContendedError({
    resources: ['room:1'],
    votes: [{ node: 0, name: 'a', outcome: 'held', latency: 1, holderTtl: 2500 }],
    attempts: 1,
    elapsed: 1,
  });
  beforeAll(() => loadTransportExceptions());

  function host(type: 'rpc' | 'ws', client: object = {}): ArgumentsHost {
    return {
      getType: () => type,
      getArgs: () => [],
      getArgByIndex: () => undefined,
      switchToRpc: () => ({ getData: () => ({}), getContext: () => ({}) }),
      switchToWs: () => ({ getData: () => ({}), getClient: () => client, getPattern: () => 'p' }),
      switchToHttp: () => {
        throw new Error('not http');
      },
    } as unknown as ArgumentsHost;
  }

  it('RPC: the error Observable carries the lock payload', async () => {
    const answer = filter.catch(contended, host('rpc'));
    expect(isObservable(answer)).toBe(true);
    const error = await lastValueFrom(answer as never).catch((e: unknown) => e);
    expect(error).toEqual<LockErrorPayload>({
      status: 'error',
      code: 'LOCK_CONTENDED',
      message: expect.any(String) as unknown as string,
      resources: ['room:1'],
      retryAfter: 3,
    });
  });

  it('WebSocket: the client receives an exception event with the lock payload', () => {
    const emitted: [string, unknown][] = [];
    filter.catch(
      new NoQuorumError({
        resources: ['room:2'],
        votes: [],
        attempts: 1,
        elapsed: 1,
        quorum: 2,
        reason: 'unavailable',
      }),
      host('ws', { emit: (event: string, data: unknown) => emitted.push([event, data]) }),
    );
    expect(emitted).toEqual([
      ['exception', expect.objectContaining({ code: 'NO_QUORUM', resources: ['room:2'] })],
    ]);
  });
});
