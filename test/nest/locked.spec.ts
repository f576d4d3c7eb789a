/**
 * `@Locked()` through the interceptor (HTTP handlers on Express) and through the method wrapper
 * (plain provider methods, @nestjs/schedule jobs), against 3 real masters.
 */
import { jest } from '@jest/globals';
import 'reflect-metadata';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  Controller,
  Get,
  Injectable,
  MessageEvent,
  Module,
  Param,
  Post,
  SetMetadata,
  Sse,
} from '@nestjs/common';
import type { INestApplication } from '@nestjs/common';
import { PATH_METADATA } from '@nestjs/common/constants';
import { Test } from '@nestjs/testing';
import { Timeout, ScheduleModule } from '@nestjs/schedule';
import type { Redis } from 'ioredis';
import request from 'supertest';
import { Observable, interval, map, take } from 'rxjs';
import {
  InvalidArgumentError,
  LOCKED_METADATA,
  LockContendedError,
  Locked,
  RedlockModule,
  RedlockService,
} from '../../lib';
import type { LockContext } from '../../lib';
import { RedisMasters } from '../harness/redis-masters';
import { uniqueResource, valuesOn, waitUntil } from '../harness/util';

/** A promise with its resolve function, to hold a locked call open. */
function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** Gates keyed by resource: a locked method waits on its gate while it holds the lock. */
const gates = new Map<string, Promise<void>>();
const seen: { where: string; context: LockContext | undefined }[] = [];
let svc: RedlockService;

@Injectable()
class InnerService {
  @Locked('item:{args.0}')
  async inner(id: string): Promise<LockContext | undefined> {
    return svc.current(`item:${id}`);
  }
}

@Injectable()
class ItemsService {
  runs = 0;
  constructor(private readonly innerService: InnerService) {}

  @Locked('item:{args.0}')
  async hold(id: string): Promise<string> {
    this.runs++;
    await gates.get(`item:${id}`);
    return `held ${id}`;
  }

  @Locked('item:{args.0}')
  async outer(id: string): Promise<[LockContext | undefined, LockContext | undefined]> {
    const mine = svc.current();
    return [mine, await this.innerService.inner(id)];
  }

  /** Locks a superset: only the missing resource is acquired. */
  @Locked(['item:{args.0}', 'item:{args.1}'])
  async pair(_a: string, _b: string): Promise<LockContext | undefined> {
    return svc.current();
  }

  @Locked('item:{args.0}', { onLocked: 'skip' })
  async skippable(_id: string): Promise<string> {
    this.runs++;
    return 'ran';
  }

  @Locked('item:{args.0}', { onLocked: 'wait', waitTimeout: 5000, retryDelay: 20 })
  async patient(_id: string): Promise<string> {
    return 'waited';
  }

  @Locked('item:{args.0}', { ttl: 1000 })
  async extended(id: string): Promise<LockContext | undefined> {
    const ctx = svc.current();
    await gates.get(`item:${id}`);
    return ctx;
  }

  @Locked('item:{args.0}', { ttl: 200, autoExtend: false })
  async notExtended(id: string): Promise<LockContext | undefined> {
    const ctx = svc.current();
    await gates.get(`item:${id}`);
    return ctx;
  }

  @Locked('item:{args.0.id}')
  async bad(_input: { id?: string }): Promise<string> {
    return 'never';
  }

  @Locked(({ args }) => `fn:${String(args[0])}`)
  async byFunction(_id: string): Promise<readonly string[] | undefined> {
    return svc.current()?.resources;
  }

  @Locked('item:{args.0}')
  syncMethod(id: string): string {
    return `sync ${id}`;
  }
}

const timeoutRan = deferred<LockContext | undefined>();

/** A @nestjs/schedule job: ScheduleModule is global, so it captures the method before us. */
@Injectable()
class Job {
  @Timeout(1)
  @Locked('job:timeout-once')
  async once(): Promise<void> {
    timeoutRan.resolve(svc.current());
  }
}

/** Another library's method-wrapping decorator (copies metadata, like ours). */
function Wrapping(): MethodDecorator {
  return (_target, _key, descriptor: PropertyDescriptor) => {
    const inner = descriptor.value as (...args: unknown[]) => unknown;
    descriptor.value = function (this: unknown, ...args: unknown[]) {
      return inner.apply(this, args);
    };
    for (const key of Reflect.getOwnMetadataKeys(inner)) {
      Reflect.defineMetadata(key, Reflect.getOwnMetadata(key, inner), descriptor.value);
    }
    return descriptor;
  };
}

@Controller('orders')
class OrdersController {
  @Post(':id')
  @Locked('order:{params.id}')
  async pay(
    @Param('id') id: string,
  ): Promise<{ id: string; token?: string; resources?: readonly string[] }> {
    await gates.get(`order:${id}`);
    const ctx = svc.current();
    seen.push({ where: 'pay', context: ctx });
    return { id, token: ctx?.token, resources: ctx?.resources };
  }

  @Post(':id/wrapped')
  @Wrapping()
  @Locked('order:{params.id}')
  async wrapped(@Param('id') _id: string): Promise<readonly string[] | undefined> {
    return svc.current()?.resources;
  }

  @Post(':id/skip')
  @Locked('order:{params.id}', { onLocked: 'skip' })
  async skip(@Param('id') id: string): Promise<{ ran: string }> {
    return { ran: id };
  }

  @Get('query/find')
  @Locked('order:{query.id}')
  async byQuery(): Promise<string> {
    return 'ok';
  }

  // Decorator order: @Locked below the route decorator and custom metadata, then above them.
  @Get('meta/below')
  @SetMetadata('custom', 'below')
  @Locked('meta:below')
  metaBelow(@Param() _params: unknown): string {
    return 'below';
  }

  @Locked('meta:above')
  @SetMetadata('custom', 'above')
  @Get('meta/above')
  metaAbove(): string {
    return 'above';
  }

  @Sse('stream/:id')
  @Locked('stream:{params.id}')
  stream(@Param('id') id: string): Observable<MessageEvent> {
    return interval(20).pipe(
      map((i) => ({ data: { id, i } })),
      take(id.startsWith('short') ? 3 : 10_000),
    );
  }
}

@Module({ providers: [InnerService, ItemsService, Job], controllers: [OrdersController] })
class FeatureModule {}

let masters: RedisMasters;
let probe: Redis[];
let app: INestApplication;
let items: ItemsService;

async function keyExists(resource: string): Promise<boolean> {
  const values = await valuesOn(probe, svc.engine.keyOf(resource));
  return values.some((v) => v !== null);
}

/**
 * After a locked call whose release it awaited (a provider method, `using()`): the key is gone
 * at once from a majority — the release resolves there —, and soon from the last master too
 * (its delete may still be on its way).
 */
async function expectReleased(resource: string): Promise<void> {
  const values = await valuesOn(probe, svc.engine.keyOf(resource));
  expect(values.filter((v) => v === null).length).toBeGreaterThanOrEqual(svc.engine.quorum);
  await releasedSoon(resource);
}

/**
 * The key is gone from every master well within the default 10 s ttl. (An HTTP handler's lock
 * is released as its response completes: the release may still be on its way when the response
 * is read.)
 */
function releasedSoon(resource: string): Promise<void> {
  return waitUntil(async () => !(await keyExists(resource)), 2000);
}

beforeAll(async () => {
  masters = await RedisMasters.start(3);
  probe = masters.createClients();
  await RedisMasters.ready(probe);
  const moduleRef = await Test.createTestingModule({
    imports: [
      RedlockModule.forRoot({
        clients: masters.urls,
        quarantine: false,
        requestTimeout: 500,
        isGlobal: true,
      }),
      ScheduleModule.forRoot(),
      FeatureModule,
    ],
  }).compile();
  app = moduleRef.createNestApplication({ logger: ['error', 'warn'] });
  await app.listen(0, '127.0.0.1');
  svc = app.get(RedlockService);
  items = app.get(ItemsService);
  await RedisMasters.ready(svc.clients as Redis[]);
});

afterAll(async () => {
  await app?.close();
  await masters?.stop();
});

afterEach(() => {
  jest.restoreAllMocks();
  gates.clear();
});

describe('on provider methods', () => {
  it('locks with exactly one acquisition and releases after the call', async () => {
    const id = uniqueResource('one');
    const gate = deferred();
    gates.set(`item:${id}`, gate.promise);
    const acquire = jest.spyOn(svc.engine, 'acquire');
    const call = items.hold(id);
    await waitUntil(() => keyExists(`item:${id}`));
    gate.resolve();
    await expect(call).resolves.toBe(`held ${id}`);
    expect(acquire.mock.calls.filter(([r]) => String(r).includes(id))).toEqual([
      [[`item:${id}`], expect.anything()],
    ]);
    await expectReleased(`item:${id}`);
  });

  it('refuses a second, independent caller (onLocked: throw) and keeps the first lock', async () => {
    const id = uniqueResource('contended');
    const gate = deferred();
    gates.set(`item:${id}`, gate.promise);
    const first = items.hold(id);
    await waitUntil(() => keyExists(`item:${id}`));
    await expect(items.hold(id)).rejects.toBeInstanceOf(LockContendedError);
    expect(await keyExists(`item:${id}`)).toBe(true); // the loser did not release the winner
    gate.resolve();
    await first;
  });

  it('is reentrant within one call chain: the inner method reuses the outer lock', async () => {
    const id = uniqueResource('reentrant');
    const acquire = jest.spyOn(svc.engine, 'acquire');
    const [outer, inner] = await items.outer(id);
    expect(acquire).toHaveBeenCalledTimes(1);
    expect(outer?.token).toBeDefined();
    expect(inner?.token).toBe(outer?.token);
    await expectReleased(`item:${id}`); // released once, by the outer call
  });

  it('acquires only the resources the chain does not hold yet', async () => {
    const a = uniqueResource('pair-a');
    const b = uniqueResource('pair-b');
    const acquire = jest.spyOn(svc.engine, 'acquire');
    const ctx = await svc.using(`item:${a}`, () => items.pair(a, b));
    expect(acquire).toHaveBeenCalledTimes(2);
    expect(acquire.mock.calls[1][0]).toEqual([`item:${b}`]);
    expect(ctx?.resources).toEqual([`item:${b}`]);
    await expectReleased(`item:${a}`);
    await expectReleased(`item:${b}`);
  });

  it('skips the method while someone else holds the lock (onLocked: skip)', async () => {
    const id = uniqueResource('skip');
    const lock = await svc.acquire(`item:${id}`);
    const before = items.runs;
    await expect(items.skippable(id)).resolves.toBeUndefined();
    expect(items.runs).toBe(before);
    await svc.release(lock);
    await expect(items.skippable(id)).resolves.toBe('ran');
  });

  it('waits for the holder (onLocked: wait)', async () => {
    const id = uniqueResource('wait');
    const lock = await svc.acquire(`item:${id}`);
    const waiting = items.patient(id);
    await svc.release(lock);
    await expect(waiting).resolves.toBe('waited');
  });

  it('extends the lock while the method runs (autoExtend, default on)', async () => {
    const id = uniqueResource('extend');
    const gate = deferred();
    gates.set(`item:${id}`, gate.promise);
    let ctx: LockContext | undefined;
    const call = items.extended(id).then((c) => (ctx = c));
    await waitUntil(
      () =>
        (svc.engine.heldLocks.find((l) => l.resources[0] === `item:${id}`)?.extensions ?? 0) >= 2,
    );
    const lock = svc.engine.heldLocks.find((l) => l.resources[0] === `item:${id}`)!;
    expect(lock.signal.aborted).toBe(false);
    expect(await keyExists(`item:${id}`)).toBe(true); // past the 1 s ttl (an extension at 1/3 left)
    gate.resolve();
    await call;
    expect(ctx?.lock).toBe(lock);
    await expectReleased(`item:${id}`); // (at once on a majority: the 1 s ttl would expire soon)
  });

  it('lets the lock expire without autoExtend, aborting the signal seen through current()', async () => {
    const id = uniqueResource('no-extend');
    const gate = deferred();
    gates.set(`item:${id}`, gate.promise);
    const call = items.notExtended(id);
    await waitUntil(() => svc.engine.heldLocks.some((l) => l.resources[0] === `item:${id}`));
    const lock = svc.engine.heldLocks.find((l) => l.resources[0] === `item:${id}`)!;
    await waitUntil(() => lock.signal.aborted);
    expect(lock.extensions).toBe(0);
    gate.resolve();
    const ctx = await call;
    expect(ctx?.signal.aborted).toBe(true);
    expect(ctx?.signal.reason).toBeInstanceOf(Error);
  });

  it('rejects a template that resolves to undefined, without locking anything', async () => {
    const acquire = jest.spyOn(svc.engine, 'acquire');
    const err = await items.bad({}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgumentError);
    expect((err as Error).message).toContain('{args.0.id}');
    expect(acquire).not.toHaveBeenCalled();
  });

  it('accepts resource functions and sync methods (which then return a Promise)', async () => {
    const id = uniqueResource('fn');
    await expect(items.byFunction(id)).resolves.toEqual([`fn:${id}`]);
    await expect(items.syncMethod(id)).resolves.toBe(`sync ${id}`);
  });

  it('locks @nestjs/schedule jobs although the scheduler captured the method first', async () => {
    const ctx = await timeoutRan.promise;
    expect(ctx?.resources).toEqual(['job:timeout-once']);
  });

  it('keeps name, length and metadata of the wrapped method', () => {
    const fn = ItemsService.prototype.hold;
    expect(fn.name).toBe('hold');
    expect(fn.length).toBe(1);
    expect(Reflect.getMetadata(LOCKED_METADATA, fn)).toMatchObject({
      resources: 'item:{args.0}',
    });
  });

  it('refuses to run on an instance the module does not know (never runs unlocked)', async () => {
    const stray = new ItemsService(new InnerService());
    await expect(stray.hold('x')).rejects.toThrow(/has not registered/);
    expect(stray.runs).toBe(0);
  });
});

describe('on HTTP handlers (Express)', () => {
  it('locks with exactly one acquisition and exposes the lock context', async () => {
    const id = uniqueResource('http');
    const acquire = jest.spyOn(svc.engine, 'acquire');
    const res = await request(app.getHttpServer()).post(`/orders/${id}`).expect(201);
    expect(acquire).toHaveBeenCalledTimes(1);
    expect(res.body).toMatchObject({ id, resources: [`order:${id}`] });
    expect(typeof res.body.token).toBe('string');
    await releasedSoon(`order:${id}`);
  });

  it('locks once when another decorator wraps the handler above @Locked()', async () => {
    const id = uniqueResource('wrapped');
    const acquire = jest.spyOn(svc.engine, 'acquire');
    const res = await request(app.getHttpServer()).post(`/orders/${id}/wrapped`).expect(201);
    expect(res.body).toEqual([`order:${id}`]);
    expect(acquire).toHaveBeenCalledTimes(1);
  });

  it('answers 423 with Retry-After and a JSON body while the resource is held', async () => {
    const id = uniqueResource('busy');
    const lock = await svc.acquire(`order:${id}`, { ttl: 8000 });
    try {
      const res = await request(app.getHttpServer()).post(`/orders/${id}`).expect(423);
      expect(res.body).toEqual({
        statusCode: 423,
        error: 'Locked',
        message: expect.any(String),
        resources: [`order:${id}`],
      });
      const retryAfter = Number(res.headers['retry-after']);
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(8);
      expect(await keyExists(`order:${id}`)).toBe(true);
    } finally {
      await svc.release(lock);
    }
  });

  it('serializes two concurrent requests on one resource: the second gets 423', async () => {
    const id = uniqueResource('race');
    const gate = deferred();
    gates.set(`order:${id}`, gate.promise);
    const first = request(app.getHttpServer())
      .post(`/orders/${id}`)
      .then((r) => r.status);
    await waitUntil(() => keyExists(`order:${id}`));
    await request(app.getHttpServer()).post(`/orders/${id}`).expect(423);
    gate.resolve();
    expect(await first).toBe(201);
  });

  it('skips the handler with onLocked: skip (route status, empty body)', async () => {
    const id = uniqueResource('http-skip');
    const lock = await svc.acquire(`order:${id}`);
    try {
      const res = await request(app.getHttpServer()).post(`/orders/${id}/skip`).expect(201);
      expect(res.text).toBe('');
    } finally {
      await svc.release(lock);
    }
    const res = await request(app.getHttpServer()).post(`/orders/${id}/skip`).expect(201);
    expect(res.body).toEqual({ ran: id });
  });

  it('answers 400 when the template cannot be resolved (missing query parameter)', async () => {
    const acquire = jest.spyOn(svc.engine, 'acquire');
    const res = await request(app.getHttpServer()).get('/orders/query/find').expect(400);
    expect(res.body.message).toContain('{query.id}');
    expect(acquire).not.toHaveBeenCalled();
    await request(app.getHttpServer()).get('/orders/query/find?id=7').expect(200);
  });

  it.each(['below', 'above'])(
    'keeps route and custom metadata with @Locked %s them',
    async (where) => {
      await request(app.getHttpServer()).get(`/orders/meta/${where}`).expect(200, where);
      const handler =
        where === 'below'
          ? OrdersController.prototype.metaBelow
          : OrdersController.prototype.metaAbove;
      expect(Reflect.getMetadata(PATH_METADATA, handler)).toBe(`meta/${where}`);
      expect(Reflect.getMetadata('custom', handler)).toBe(where);
      expect(Reflect.getMetadata(LOCKED_METADATA, handler)).toBeDefined();
    },
  );

  it('holds the lock of an Observable (SSE) handler until the client disconnects', async () => {
    const id = uniqueResource('sse');
    const release = jest.spyOn(svc.engine, 'release');
    const { port } = app.getHttpServer().address() as AddressInfo;
    const req = httpRequest({ host: '127.0.0.1', port, path: `/orders/stream/${id}` });
    const firstChunk = new Promise<void>((resolve, reject) => {
      req.on('response', (res) => res.once('data', () => resolve()));
      req.on('error', reject);
    });
    req.end();
    await firstChunk;
    expect(await keyExists(`stream:${id}`)).toBe(true);
    req.on('error', () => undefined);
    req.destroy();
    await waitUntil(async () => !(await keyExists(`stream:${id}`)));
    expect(release).toHaveBeenCalledTimes(1);
  });

  it('releases an Observable handler exactly once when it completes', async () => {
    const id = uniqueResource('short');
    const release = jest.spyOn(svc.engine, 'release');
    const res = await request(app.getHttpServer()).get(`/orders/stream/${id}`).expect(200);
    expect(res.text.match(/^data:/gm)).toHaveLength(3);
    expect(release).toHaveBeenCalledTimes(1);
    await releasedSoon(`stream:${id}`);
  });
});
