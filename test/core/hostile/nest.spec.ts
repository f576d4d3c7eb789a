/**
 * Hostile input against the Nest layer with 3 real masters (items 4, 7, 8, 11, 13,
 * 14): module options, `@Locked()` options, resources resolved from templates and functions, and
 * every `RedlockService` entry point. Each bad input ends in a typed error (a 400 over HTTP) and
 * writes no key on any master (the keyspace is scanned before and after).
 */
import 'reflect-metadata';
import { Body, Controller, Injectable, Module, Post } from '@nestjs/common';
import type { INestApplication, Provider } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { Redis } from 'ioredis';
import request from 'supertest';
import { InvalidArgumentError, InvalidConfigurationError } from '../../../lib/core/base/errors';
import { Lock } from '../../../lib/core/lock/lock';
import { Locked } from '../../../lib/decorators/locked.decorator';
import type { RedlockModuleOptions } from '../../../lib/interfaces/redlock-module-options.interface';
import { RedlockModule } from '../../../lib/redlock.module';
import { RedlockService } from '../../../lib/redlock.service';
import { RedisMasters } from '../../harness/redis-masters';
import { uniqueResource, keyspaceOf, newKeys } from '../../harness/util';

@Injectable()
class Worker {
  runs = 0;

  @Locked('item:{args.0}')
  async byTemplate(_id: unknown): Promise<string> {
    this.runs++;
    return 'ran';
  }

  @Locked(({ args }) => args[0] as string[])
  async byFunction(_resources: unknown): Promise<string> {
    this.runs++;
    return 'ran';
  }
}

@Controller('orders')
class OrdersController {
  runs = 0;

  @Post()
  @Locked('order:{body.id}')
  create(@Body() _body: unknown): string {
    this.runs++;
    return 'created';
  }
}

@Module({ providers: [Worker], controllers: [OrdersController] })
class FeatureModule {}

let masters: RedisMasters;
let probe: Redis[];
let app: INestApplication;
let svc: RedlockService;
let worker: Worker;

function baseOptions(): RedlockModuleOptions {
  return { clients: masters.urls, quarantine: false, requestTimeout: 500 };
}

beforeAll(async () => {
  masters = await RedisMasters.start(3);
  probe = masters.createClients();
  await RedisMasters.ready(probe);
  const moduleRef = await Test.createTestingModule({
    imports: [RedlockModule.forRoot({ ...baseOptions(), isGlobal: true }), FeatureModule],
  }).compile();
  app = moduleRef.createNestApplication({ logger: ['error'] });
  await app.init();
  svc = app.get(RedlockService);
  worker = app.get(Worker);
  await RedisMasters.ready(svc.clients as Redis[]);
});

afterAll(async () => {
  await app?.close();
  await masters?.stop();
});

const keyspace = (): Promise<string[][]> => keyspaceOf(probe);

/** No master holds a key it did not hold before. */
function expectNoNewKey(before: string[][], after: string[][]): void {
  expect(newKeys(before, after)).toEqual(before.map(() => []));
}

/** Expects `call` to fail with a typed error on `field` and the keyspace to stay as it was. */
async function expectRejected(
  call: () => unknown,
  type: typeof InvalidArgumentError | typeof InvalidConfigurationError,
  field: string,
): Promise<Error> {
  // Settled first: a write of an earlier call to the last master (rounds end at a quorum) must
  // not count as this call's new key.
  await Promise.all(svc.clients.map((c) => (c as Redis).ping()));
  const before = await keyspace();
  let error: unknown;
  try {
    await call();
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(type);
  expect((error as InvalidArgumentError).field).toBe(field);
  // The app's own connections: anything sent before this PING has been applied.
  await Promise.all(svc.clients.map((c) => (c as Redis).ping()));
  expectNoNewKey(before, await keyspace());
  return error as Error;
}

/* eslint-disable no-sparse-arrays */
describe('RedlockService', () => {
  it.each<[string, unknown]>([
    ['resources[0]', [, 'a']],
    ['resources[0]', new Array(2)],
    ['resources', '\uD800'],
    ['resources[1]', ['a', '\uDC00']],
  ])('acquire, tryAcquire, using and current reject %s', async (field, resources) => {
    const r = resources as string[];
    await expectRejected(() => svc.acquire(r), InvalidArgumentError, field);
    await expectRejected(() => svc.tryAcquire(r), InvalidArgumentError, field);
    await expectRejected(() => svc.using(r, () => 'ran'), InvalidArgumentError, field);
    await expectRejected(() => svc.current(r), InvalidArgumentError, field);
  });

  it('using rejects a missing routine with a typed error before locking', async () => {
    for (const routine of [null, undefined, 'run']) {
      await expectRejected(
        () => svc.using(uniqueResource('null-routine'), routine as never),
        InvalidArgumentError,
        'routine',
      );
    }
  });

  it('rejects bad options by name', async () => {
    const r = uniqueResource('opts');
    await expectRejected(
      () => svc.acquire(r, { retryDely: 5 } as never),
      InvalidArgumentError,
      'retryDely',
    );
    await expectRejected(() => svc.acquire(r, { ttl: 2 }), InvalidArgumentError, 'ttl');
    await expectRejected(
      () => svc.acquire(r, { retryDelay: 2 ** 31 }),
      InvalidArgumentError,
      'retryDelay',
    );
    await expectRejected(
      () => svc.using(r, () => 'ran', { ttl: 1000, extendThreshold: 1000 }),
      InvalidArgumentError,
      'extendThreshold',
    );
  });

  it('release and extend refuse forged locks', async () => {
    const forged = Object.create(Lock.prototype) as Lock;
    await expectRejected(() => svc.release(forged), InvalidArgumentError, 'lock');
    await expectRejected(() => svc.extend(forged), InvalidArgumentError, 'lock');
  });
});

describe('@Locked() resources resolved at call time', () => {
  it.each<[string, unknown]>([
    ['resources[0]', [, 'a']],
    ['resources', new Array(2)],
    ['resources', ['ok', '\uD800']],
  ])('a resource function returning %p is a typed error', async (_label, resources) => {
    const before = worker.runs;
    await expectRejected(() => worker.byFunction(resources), InvalidArgumentError, 'resources');
    expect(worker.runs).toBe(before);
  });

  it('a template filled with a lone surrogate is a typed error', async () => {
    await expectRejected(() => worker.byTemplate('\uDC00'), InvalidArgumentError, 'resources[0]');
    expect(worker.runs).toBe(0);
  });

  it('over HTTP, a JSON body carrying a lone surrogate gets 400 and locks nothing', async () => {
    await Promise.all(svc.clients.map((c) => (c as Redis).ping()));
    const before = await keyspace();
    const body = '{"id":"\\ud800"}'; // JSON escapes may carry lone surrogates
    const res = await request(app.getHttpServer())
      .post('/orders')
      .set('Content-Type', 'application/json')
      .send(body);
    expect(res.status).toBe(400);
    expect(app.get(OrdersController).runs).toBe(0);
    await Promise.all(svc.clients.map((c) => (c as Redis).ping()));
    expectNoNewKey(before, await keyspace());
    // Control: a well-formed id is locked and the handler runs.
    const ok = await request(app.getHttpServer()).post('/orders').send({ id: 'A-1' });
    expect(ok.status).toBe(201);
  });
});

describe('module and @Locked() options at bootstrap', () => {
  async function bootFails(
    options: Record<string, unknown>,
    providers: Provider[] = [],
  ): Promise<unknown> {
    const moduleRef = Test.createTestingModule({
      imports: [RedlockModule.forRoot({ ...baseOptions(), ...options } as RedlockModuleOptions)],
      providers,
    });
    moduleRef.setLogger({ log() {}, error() {}, warn() {}, debug() {}, verbose() {} });
    const compiled = await moduleRef.compile();
    try {
      await compiled.init();
    } catch (err) {
      return Promise.reject(err);
    }
    await compiled.close();
  }

  it.each<[string, Record<string, unknown>]>([
    ['retryDely', { retryDely: 5 }],
    ['keyPrefix', { keyPrefix: '' }],
    ['keyPrefix', { keyPrefix: '\uD800:' }],
    ['retryDelay', { retryDelay: 2 ** 31 }],
    ['retryJitter', { retryJitter: 2 ** 31 }],
    ['extendThreshold', { extendThreshold: 10_000 }],
    ['ttl', { ttl: 2 }],
    ['quarantine.enabled', { quarantine: { enabled: 'no' } }],
    ['quarantine.trustAppendFsyncAlways', { quarantine: { trustAppendFsyncAlways: 'yes' } }],
    ['lockedDefaults.ttl', { lockedDefaults: { ttl: 1 } }],
    ['lockedDefaults.retryDely', { lockedDefaults: { retryDely: 5 } }],
  ])('module option %s fails the bootstrap', async (field, options) => {
    const error = await expectRejected(() => bootFails(options), InvalidConfigurationError, field);
    if (field.endsWith('Dely')) expect(error.message).toMatch(/valid names are .*retryDelay/);
  });

  it('a @Locked() ttl the engine could never grant fails the bootstrap, naming the method', async () => {
    @Injectable()
    class TooShort {
      @Locked('too-short', { ttl: 2 })
      async run(): Promise<void> {}
    }
    await expectRejected(
      () => bootFails({}, [TooShort]),
      InvalidConfigurationError,
      'TooShort.run.ttl',
    );
  });
});
