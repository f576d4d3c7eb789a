/**
 * RedlockModule: option resolution (forRoot = forRootAsync), validation, client ownership,
 * redaction of credentials, masters down at startup, and graceful shutdown (no new locks while
 * running calls finish; locks released before the clients close — anchan828/nest-redlock#492),
 * against real masters.
 */
import { jest } from '@jest/globals';
import 'reflect-metadata';
import { Inject, Injectable, Module } from '@nestjs/common';
import type { INestApplicationContext, LoggerService } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import Redis, { Cluster } from 'ioredis';
import {
  InvalidConfigurationError,
  Locked,
  REDLOCK_MODULE_OPTIONS,
  RedlockModule,
  RedlockService,
  ShuttingDownError,
} from '../../lib';
import { normalizeOptions } from '../../lib/options';
import type {
  LockContext,
  RedlockModuleOptions,
  RedlockOptionsFactory,
  ResolvedRedlockModuleOptions,
} from '../../lib';
import { RedisMasters, freePort } from '../harness/redis-masters';
import { sleep, uniqueResource, valuesOn, waitUntil } from '../harness/util';

const SECRET = 's3cret-Pa55word';

/** A Nest logger that records every line. */
class RecordingLogger implements LoggerService {
  readonly lines: string[] = [];
  log(m: unknown): void {
    this.lines.push(String(m));
  }
  error(m: unknown, ...rest: unknown[]): void {
    this.lines.push([m, ...rest].map(String).join(' '));
  }
  warn(m: unknown): void {
    this.lines.push(String(m));
  }
  debug(m: unknown): void {
    this.lines.push(String(m));
  }
  verbose(m: unknown): void {
    this.lines.push(String(m));
  }
}

let masters: RedisMasters;
let probe: Redis[];
const opened: INestApplicationContext[] = [];

async function boot(
  imports: Parameters<typeof Test.createTestingModule>[0]['imports'],
  providers: Parameters<typeof Test.createTestingModule>[0]['providers'] = [],
  logger?: LoggerService,
): Promise<INestApplicationContext> {
  const builder = Test.createTestingModule({ imports, providers });
  builder.setLogger(logger ?? new RecordingLogger());
  const moduleRef = await builder.compile();
  await moduleRef.init(); // a context whose init failed cannot be closed (close() rethrows)
  opened.push(moduleRef);
  return moduleRef;
}

/** Closes a context now (and not again in afterEach). */
async function closeNow(ctx: INestApplicationContext): Promise<void> {
  opened.splice(opened.indexOf(ctx), 1);
  await ctx.close();
}

function baseOptions(): RedlockModuleOptions {
  return { clients: masters.urls, quarantine: false, requestTimeout: 500 };
}

beforeAll(async () => {
  masters = await RedisMasters.start(3);
  probe = masters.createClients();
  await RedisMasters.ready(probe);
});

afterEach(async () => {
  await Promise.all(opened.splice(0).map((m) => m.close()));
});

afterAll(async () => {
  await masters?.stop();
});

describe('options', () => {
  @Injectable()
  class OptionsFactory implements RedlockOptionsFactory {
    createRedlockOptions(): RedlockModuleOptions {
      return baseOptions();
    }
  }

  @Module({ providers: [OptionsFactory], exports: [OptionsFactory] })
  class OptionsModule {}

  /** A feature that injects the service without importing RedlockModule (global module). */
  @Injectable()
  class Consumer {
    constructor(readonly redlock: RedlockService) {}
  }

  it('forRoot and forRootAsync (useFactory, useClass, useExisting) resolve identically', async () => {
    const variants = [
      RedlockModule.forRoot({ ...baseOptions(), isGlobal: true }),
      RedlockModule.forRootAsync({
        imports: [OptionsModule],
        inject: [OptionsFactory],
        useFactory: async (f: OptionsFactory) => f.createRedlockOptions(),
        isGlobal: true,
      }),
      RedlockModule.forRootAsync({ useClass: OptionsFactory, isGlobal: true }),
      RedlockModule.forRootAsync({
        imports: [OptionsModule],
        useExisting: OptionsFactory,
        isGlobal: true,
      }),
    ];
    const resolved: ResolvedRedlockModuleOptions[] = [];
    for (const variant of variants) {
      const ctx = await boot([variant], [Consumer]);
      resolved.push(ctx.get(REDLOCK_MODULE_OPTIONS));
      expect(ctx.get(Consumer).redlock).toBe(ctx.get(RedlockService));
    }
    for (const r of resolved.slice(1)) expect(r).toEqual(resolved[0]);
    expect(resolved[0]).toEqual(normalizeOptions(baseOptions()));
    expect(resolved[0]).toMatchObject({
      clients: masters.urls,
      ttl: 10_000,
      quorum: 2,
      requestTimeout: 500,
      contentionStatus: 423,
      shutdownTimeout: 10_000,
      lockedDefaults: { onLocked: 'throw', autoExtend: true },
      quarantine: { enabled: false },
      clientOptions: { enableOfflineQueue: false, maxRetriesPerRequest: 0, lazyConnect: false },
    });
  });

  it.each<[string, Partial<RedlockModuleOptions> & Record<string, unknown>]>([
    ['clients', { clients: [] }],
    ['ttl', { ttl: 0 }],
    ['requestTimeout', { ttl: 100, requestTimeout: 100 }],
    ['lockedDefaults.onLocked', { lockedDefaults: { onLocked: 'never' as 'throw' } }],
    ['lockedDefaults.ttl', { maxTtl: 1000, ttl: 800, lockedDefaults: { ttl: 5000 } }],
    ['contentionStatus', { contentionStatus: 500 as 423 }],
    ['shutdownTimeout', { shutdownTimeout: -1 }],
    ['tll', { tll: 5 }],
    ['clients[1]', { clients: ['redis://127.0.0.1:1', 'http://127.0.0.1:2'] }],
  ])(
    'fails bootstrap naming the invalid option %s (forRoot and forRootAsync)',
    async (field, bad) => {
      for (const imports of [
        [RedlockModule.forRoot({ ...baseOptions(), ...bad } as RedlockModuleOptions)],
        [
          RedlockModule.forRootAsync({
            useFactory: () => ({ ...baseOptions(), ...bad }) as RedlockModuleOptions,
          }),
        ],
      ]) {
        const err = await boot(imports).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(InvalidConfigurationError);
        expect((err as InvalidConfigurationError).field).toBe(field);
        expect((err as Error).message).toContain(`"${field}"`);
      }
    },
  );

  it('fails bootstrap when a @Locked() ttl exceeds maxTtl, naming the method', async () => {
    @Injectable()
    class TooLong {
      @Locked('too-long', { ttl: 5000 })
      async run(): Promise<void> {}
    }
    const err = await boot(
      [RedlockModule.forRoot({ ...baseOptions(), maxTtl: 2000, ttl: 1000 })],
      [TooLong],
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidConfigurationError);
    expect((err as InvalidConfigurationError).field).toBe('TooLong.run.ttl');
  });

  it('accepts Redis Cluster instances as masters', () => {
    const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true });
    const resolved = normalizeOptions({ clients: [cluster, ...masters.urls.slice(1)] });
    expect(resolved.clients[0]).toBe(cluster);
    cluster.disconnect();
  });
});

describe('credentials', () => {
  it('never shows a password in errors (invalid URLs)', async () => {
    for (const url of [`redis://user:${SECRET}@`, `http://user:${SECRET}@127.0.0.1:6379`]) {
      const err = await boot([RedlockModule.forRoot({ clients: [url] })]).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidConfigurationError);
      expect((err as Error).message).toContain('user:***@');
      expect((err as Error).message).not.toContain(SECRET);
    }
  });

  it('starts with a master down, warns with the redacted URL, and locks with the others', async () => {
    const deadPort = await freePort();
    const logger = new RecordingLogger();
    const ctx = await boot(
      [
        RedlockModule.forRoot({
          ...baseOptions(),
          clients: [`redis://user:${SECRET}@127.0.0.1:${deadPort}`, ...masters.urls.slice(1)],
        }),
      ],
      [],
      logger,
    );
    const svc = ctx.get(RedlockService);
    expect(svc.masterNames[0]).toBe(`redis://user:***@127.0.0.1:${deadPort}`);
    await waitUntil(() =>
      logger.lines.some(
        (l) => l.includes(`redis://user:***@127.0.0.1:${deadPort}`) && /unreachable/.test(l),
      ),
    );
    const lock = await svc.acquire(uniqueResource('one-down'));
    expect(lock.votes.filter((v) => v.outcome === 'ok')).toHaveLength(2);
    await svc.release(lock);
    expect(logger.lines.join('\n')).not.toContain(SECRET);
  });

  it('authenticates with the URL password and keeps it out of the logs (right and wrong password)', async () => {
    const secured = await RedisMasters.start(1, { extraArgs: ['--requirepass', SECRET] });
    try {
      const port = secured.masters[0].port;
      const logger = new RecordingLogger();
      const ok = await boot(
        [
          RedlockModule.forRoot({
            clients: [`redis://default:${SECRET}@127.0.0.1:${port}`],
            quarantine: false,
          }),
        ],
        [],
        logger,
      );
      const lock = await ok.get(RedlockService).acquire(uniqueResource('auth'));
      await lock.release();
      const wrong = await boot(
        [
          RedlockModule.forRoot({
            clients: [`redis://default:${SECRET}x@127.0.0.1:${port}`],
            quarantine: false,
          }),
        ],
        [],
        logger,
      );
      await waitUntil(() => logger.lines.some((l) => /WRONGPASS|invalid password/i.test(l)));
      expect(wrong.get(RedlockService).masterNames).toEqual([
        `redis://default:***@127.0.0.1:${port}`,
      ]);
      expect(logger.lines.join('\n')).not.toContain(SECRET);
    } finally {
      await Promise.all(opened.splice(0).map((m) => m.close()));
      await secured.stop();
    }
  });
});

describe('lifecycle', () => {
  const gates = new Map<string, Promise<void>>();
  const events: string[] = [];
  let lastContext: LockContext | undefined;

  @Injectable()
  class Worker {
    constructor(@Inject(RedlockService) private readonly redlock: RedlockService) {}

    @Locked('work:{args.0}')
    async work(id: string): Promise<string> {
      lastContext = this.redlock.current();
      await gates.get(id);
      events.push(`done ${id}`);
      return id;
    }
  }

  it('closes the clients it created, never the ones it was given', async () => {
    const given = new Redis(masters.masters[2].port, '127.0.0.1');
    try {
      const ctx = await boot([
        RedlockModule.forRoot({
          ...baseOptions(),
          clients: [masters.urls[0], { host: '127.0.0.1', port: masters.masters[1].port }, given],
        }),
      ]);
      const [fromUrl, fromOptions, passed] = ctx.get(RedlockService).clients as Redis[];
      expect(passed).toBe(given);
      await RedisMasters.ready([fromUrl, fromOptions, given] as Redis[]);
      await closeNow(ctx);
      expect(fromUrl.status).toBe('end');
      expect(fromOptions.status).toBe('end');
      expect(given.status).toBe('ready');
      await expect(given.ping()).resolves.toBe('PONG');
    } finally {
      given.disconnect();
    }
  });

  it('releases held locks and running calls on shutdown before closing the clients', async () => {
    const ctx = await boot(
      [RedlockModule.forRoot({ ...baseOptions(), shutdownTimeout: 200 })],
      [Worker],
    );
    const svc = ctx.get(RedlockService);
    const held = uniqueResource('held');
    const stuck = uniqueResource('stuck');
    let open!: () => void;
    gates.set(stuck, new Promise<void>((r) => (open = r)));
    await svc.acquire(held); // never released by the test
    const running = ctx.get(Worker).work(stuck);
    await waitUntil(() => lastContext?.resources[0] === `work:${stuck}`);
    const ctxOfStuck = lastContext!;
    // Without its scripts, a master answers the release with NOSCRIPT and gets a second request
    // (EVAL) after the engine already resolved at a majority: that one must not be cut off either.
    await Promise.all(probe.map((c) => c.script('FLUSH')));
    await closeNow(ctx);
    // Released on every master — impossible if the clients had been closed first.
    expect(await valuesOn(probe, svc.engine.keyOf(held))).toEqual([null, null, null]);
    expect(await valuesOn(probe, svc.engine.keyOf(`work:${stuck}`))).toEqual([null, null, null]);
    expect((svc.clients as Redis[]).every((c) => c.status === 'end')).toBe(true);
    expect(ctxOfStuck.remainingValidity).toBe(0);
    open();
    await expect(running).resolves.toBe(stuck);
  });

  it('stops taking new locks on shutdown while running calls finish (REDLOCK.md, "Extension")', async () => {
    // ttl 1 s, and the running call is held open for longer: auto-extension must keep its lock
    // valid through the drain. (With 600 ms each extension had 200 ms to land: too little on a
    // loaded machine.)
    const ctx = await boot([RedlockModule.forRoot({ ...baseOptions(), ttl: 1000 })], [Worker]);
    const svc = ctx.get(RedlockService);
    const id = uniqueResource('finishing');
    const busy = uniqueResource('busy');
    let open!: () => void;
    gates.set(id, new Promise<void>((r) => (open = r)));
    const running = ctx.get(Worker).work(id);
    await waitUntil(() => lastContext?.resources[0] === `work:${id}`);
    const runningContext = lastContext!;
    await svc.acquire(busy);
    let waited = 0;
    const stopObserving = svc.engine.observe((e) => {
      if (e.type === 'failed') waited++;
    });
    const waiter = svc
      .acquire(busy, { retryCount: 1_000_000, waitTimeout: 50_000 })
      .catch((e: unknown) => e);

    const closing = closeNow(ctx);
    await waitUntil(() => svc.isShuttingDown);
    // The waiting acquisition ends at once with ShuttingDownError (not after its 50 s wait).
    const ended = await waiter;
    expect(ended).toBeInstanceOf(ShuttingDownError);
    expect((ended as ShuttingDownError).resources).toEqual([busy]);
    expect(waited).toBe(1);
    stopObserving();
    // New locks are refused, with the typed error, on every entry point.
    const fresh = uniqueResource('fresh');
    await expect(svc.acquire(fresh)).rejects.toBeInstanceOf(ShuttingDownError);
    await expect(svc.tryAcquire(fresh)).rejects.toBeInstanceOf(ShuttingDownError);
    await expect(svc.using(fresh, () => 'ran')).rejects.toBeInstanceOf(ShuttingDownError);
    await expect(ctx.get(Worker).work(fresh)).rejects.toBeInstanceOf(ShuttingDownError);
    expect(await valuesOn(probe, svc.engine.keyOf(fresh))).toEqual([null, null, null]);
    const health = await svc.engine.health();
    expect(health).toMatchObject({ draining: true, available: false, usable: 3 });

    // The running call keeps its lock, extended past its ttl, until it finishes.
    await sleep(1200);
    expect(runningContext.signal.reason).toBeUndefined();
    expect(await valuesOn(probe, svc.engine.keyOf(`work:${id}`))).toEqual(
      Array(3).fill(runningContext.token),
    );
    open();
    await closing;
    await expect(running).resolves.toBe(id);
    expect(await valuesOn(probe, svc.engine.keyOf(`work:${id}`))).toEqual([null, null, null]);
    expect(await valuesOn(probe, svc.engine.keyOf(busy))).toEqual([null, null, null]);
    expect((svc.clients as Redis[]).every((c) => c.status === 'end')).toBe(true);
  });

  it('waits for running locked calls before closing the engine', async () => {
    const ctx = await boot([RedlockModule.forRoot(baseOptions())], [Worker]);
    const svc = ctx.get(RedlockService);
    const id = uniqueResource('drain');
    let open!: () => void;
    gates.set(id, new Promise<void>((r) => (open = r)));
    const realClose = svc.engine.close.bind(svc.engine);
    const close = jest.spyOn(svc.engine, 'close').mockImplementation(async () => {
      events.push('engine closed');
      await realClose();
    });
    const running = ctx.get(Worker).work(id);
    await waitUntil(() => lastContext?.resources[0] === `work:${id}`);
    const closing = closeNow(ctx);
    setTimeout(open, 100);
    await closing;
    await expect(running).resolves.toBe(id);
    expect(events.slice(-2)).toEqual([`done ${id}`, 'engine closed']);
    expect(close).toHaveBeenCalledTimes(1);
    expect(await valuesOn(probe, svc.engine.keyOf(`work:${id}`))).toEqual([null, null, null]);
  });
});
