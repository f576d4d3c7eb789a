/**
 * Failure mapping per transport, against 5 real masters: contention over HTTP (Express and
 * Fastify, `contentionStatus: 409`) with `Retry-After`, RPC and WebSocket payloads, and — once
 * 3 of the 5 masters are killed — 503 / NO_QUORUM (REDLOCK.md: no majority, no lock).
 */
import { jest } from '@jest/globals';
import 'reflect-metadata';
import { AsyncResource } from 'node:async_hooks';
import { Controller, Injectable, Param, Post } from '@nestjs/common';
import type { CallHandler, ExecutionContext, INestApplication } from '@nestjs/common';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { RpcException } from '@nestjs/microservices';
import { WsException } from '@nestjs/websockets';
import { Test } from '@nestjs/testing';
import { defer, from, lastValueFrom } from 'rxjs';
import request from 'supertest';
import { LockedInterceptor, Locked, RedlockModule, RedlockService } from '../../lib';
import type { LockContext, LockErrorPayload } from '../../lib';
import { RedisMasters } from '../harness/redis-masters';
import { uniqueResource } from '../harness/util';

let svc: RedlockService;

@Controller('pay')
class PayController {
  @Post(':id')
  @Locked('pay:{params.id}')
  async pay(@Param('id') id: string): Promise<{ id: string }> {
    return { id };
  }
}

/** Stands for a microservice controller or a gateway: its handler is the @Locked wrapper. */
@Injectable()
class RoomHandlers {
  calls = 0;

  @Locked('room:{data.room}')
  async join(data: { room: string }): Promise<LockContext | undefined> {
    this.calls++;
    return svc.current(`room:${data.room}`);
  }
}

/** A minimal RPC / WS execution context, invoking the handler the way Nest does. */
function transportContext(
  type: 'rpc' | 'ws',
  instance: RoomHandlers,
  data: unknown,
): { context: ExecutionContext; next: CallHandler } {
  const handler = RoomHandlers.prototype.join;
  const args = type === 'rpc' ? [data, {}] : [{}, data];
  const context = {
    getType: () => type,
    getHandler: () => handler,
    getClass: () => RoomHandlers,
    getArgs: () => args,
    getArgByIndex: (i: number) => args[i],
    switchToRpc: () => ({ getData: () => data, getContext: () => ({}) }),
    switchToWs: () => ({ getData: () => data, getClient: () => ({}), getPattern: () => 'join' }),
    switchToHttp: () => {
      throw new Error('not http');
    },
  } as unknown as ExecutionContext;
  // Nest binds the handler call to the async context in which `handle()` is called.
  const next: CallHandler = {
    handle: () =>
      defer(AsyncResource.bind(() => from(handler.call(instance, data as { room: string })))),
  };
  return { context, next };
}

let masters: RedisMasters;
const apps: Record<'express' | 'fastify', INestApplication> = {} as never;

beforeAll(async () => {
  masters = await RedisMasters.start(5);
  for (const platform of ['express', 'fastify'] as const) {
    const moduleRef = await Test.createTestingModule({
      imports: [
        RedlockModule.forRoot({
          clients: masters.urls,
          quarantine: false,
          requestTimeout: 500,
          contentionStatus: 409,
          isGlobal: true,
        }),
      ],
      controllers: [PayController],
      providers: [RoomHandlers],
    }).compile();
    const app =
      platform === 'fastify'
        ? moduleRef.createNestApplication(new FastifyAdapter(), { logger: false })
        : moduleRef.createNestApplication({ logger: false });
    await app.init();
    if (platform === 'fastify') await app.getHttpAdapter().getInstance().ready();
    apps[platform] = app;
  }
  svc = apps.express.get(RedlockService);
});

afterAll(async () => {
  await Promise.all(Object.values(apps).map((a) => a.close()));
  await masters?.stop();
});

describe.each(['express', 'fastify'] as const)('HTTP on %s', (platform) => {
  it('answers 409 (contentionStatus) with Retry-After while the resource is held', async () => {
    const id = uniqueResource(platform);
    const lock = await svc.acquire(`pay:${id}`, { ttl: 5000 });
    try {
      const res = await request(apps[platform].getHttpServer()).post(`/pay/${id}`).expect(409);
      expect(res.body).toEqual({
        statusCode: 409,
        error: 'Conflict',
        message: expect.any(String),
        resources: [`pay:${id}`],
      });
      const retryAfter = Number(res.headers['retry-after']);
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(5);
    } finally {
      await svc.release(lock);
    }
    await request(apps[platform].getHttpServer()).post(`/pay/${id}`).expect(201, { id });
  });
});

describe.each(['rpc', 'ws'] as const)('over %s', (type) => {
  const Exception = type === 'rpc' ? RpcException : WsException;

  it('locks the handler exactly once (the wrapper is the handler) and runs it in the lock context', async () => {
    const room = uniqueResource(type);
    const handlers = apps.express.get(RoomHandlers);
    const interceptor = apps.express.get(LockedInterceptor);
    const acquire = jest.spyOn(svc.engine, 'acquire');
    try {
      const { context, next } = transportContext(type, handlers, { room });
      const before = handlers.calls;
      const ctx = (await lastValueFrom(interceptor.intercept(context, next))) as LockContext;
      expect(handlers.calls).toBe(before + 1);
      expect(ctx?.resources).toEqual([`room:${room}`]);
      expect(acquire).toHaveBeenCalledTimes(1);
    } finally {
      acquire.mockRestore();
    }
  });

  it('maps contention to a LOCK_CONTENDED payload', async () => {
    const room = uniqueResource(type);
    const interceptor = apps.express.get(LockedInterceptor);
    const lock = await svc.acquire(`room:${room}`, { ttl: 4000 });
    try {
      const { context, next } = transportContext(type, apps.express.get(RoomHandlers), { room });
      const err = await lastValueFrom(interceptor.intercept(context, next)).catch(
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(Exception);
      expect((err as RpcException).getError()).toEqual<LockErrorPayload>({
        status: 'error',
        code: 'LOCK_CONTENDED',
        message: expect.any(String),
        resources: [`room:${room}`],
        retryAfter: expect.any(Number),
      });
    } finally {
      await svc.release(lock);
    }
  });

  it('maps an unresolvable template to INVALID_ARGUMENT', async () => {
    const { context, next } = transportContext(type, apps.express.get(RoomHandlers), { nope: 1 });
    const err = await lastValueFrom(
      apps.express.get(LockedInterceptor).intercept(context, next),
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Exception);
    expect((err as RpcException).getError()).toMatchObject({
      code: 'INVALID_ARGUMENT',
      resources: [],
    });
  });
});

describe('with 3 of 5 masters down', () => {
  beforeAll(async () => {
    await Promise.all(masters.masters.slice(0, 3).map((m) => m.kill()));
  });

  it.each(['express', 'fastify'] as const)('answers 503 over HTTP (%s)', async (platform) => {
    const id = uniqueResource('down');
    const res = await request(apps[platform].getHttpServer()).post(`/pay/${id}`).expect(503);
    expect(res.body).toEqual({
      statusCode: 503,
      error: 'Service Unavailable',
      message: expect.any(String),
      resources: [`pay:${id}`],
    });
  });

  it('sends NO_QUORUM over RPC', async () => {
    const room = uniqueResource('down');
    const { context, next } = transportContext('rpc', apps.express.get(RoomHandlers), { room });
    const err = await lastValueFrom(
      apps.express.get(LockedInterceptor).intercept(context, next),
    ).catch((e: unknown) => e);
    expect((err as RpcException).getError()).toMatchObject({
      code: 'NO_QUORUM',
      resources: [`room:${room}`],
    });
  });
});
