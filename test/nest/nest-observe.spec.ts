import 'reflect-metadata';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';
import {
  Controller,
  Inject,
  Injectable,
  Module,
  Param,
  Post,
  type DynamicModule,
  type INestApplication,
  type NestApplicationOptions,
  type OnModuleDestroy,
  type OnModuleInit,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { RedlockModule } from '../../lib/redlock.module';
import { RedlockService } from '../../lib/redlock.service';
import { reportToNestObserve, type NestObserveTracer } from '../../lib/telemetry/nest-observe';
import { RedisMasters } from '../harness/redis-masters';
import { uniqueResource, waitUntil } from '../harness/util';

/**
 * `reportToNestObserve` with the real `@nestjs/observe` agent, offline: the agent's `endpoint`
 * points at an in-process collector (a local HTTP server) that decodes the batches the agent's
 * worker thread POSTs (gzip JSON, `/applications/telemetry`); the credentials are placeholders,
 * nothing leaves the machine. `@nestjs/observe` is a devDependency.
 */
const OBSERVE = '@nestjs/observe';
interface ObserveApi {
  createObserveModule(): {
    ObserveModule: { forRoot(options: Record<string, unknown>): DynamicModule };
    ObserveInstrument: unknown;
  };
  TracerService: abstract new (...args: never[]) => NestObserveTracer;
}
/** Every object in a decoded batch, depth first. */
function* objectsIn(value: unknown): Generator<Record<string, unknown>> {
  if (Array.isArray(value)) for (const v of value) yield* objectsIn(v);
  else if (value && typeof value === 'object') {
    yield value as Record<string, unknown>;
    for (const v of Object.values(value)) yield* objectsIn(v);
  }
}

describe(`reportToNestObserve with ${OBSERVE}`, () => {
  let api: ObserveApi;
  let masters: RedisMasters;
  let collector: Server;
  let batches: unknown[];
  let app: INestApplication | undefined;

  beforeAll(async () => {
    api = (await import(OBSERVE)) as ObserveApi;
    masters = await RedisMasters.start(3);
    batches = [];
    collector = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (req.method === 'POST' && req.url === '/applications/telemetry') {
          batches.push(JSON.parse(gunzipSync(Buffer.concat(chunks)).toString('utf8')));
        }
        res.writeHead(202).end();
      });
    });
    await new Promise<void>((r) => collector.listen(0, '127.0.0.1', r));
  });

  afterAll(async () => {
    await app?.close();
    await new Promise((r) => collector.close(r));
    await masters?.stop();
  });

  it('sends lock spans (inside the request trace) and lock metrics to the collector', async () => {
    const { ObserveModule, ObserveInstrument } = api.createObserveModule();

    @Injectable()
    class ObserveRedlockBridge implements OnModuleInit, OnModuleDestroy {
      private stop?: () => void;
      constructor(
        private readonly redlock: RedlockService,
        @Inject(api.TracerService) private readonly tracer: NestObserveTracer,
      ) {}
      onModuleInit(): void {
        this.stop = reportToNestObserve(this.redlock.engine, this.tracer);
      }
      onModuleDestroy(): void {
        this.stop?.();
      }
    }

    @Controller()
    class LocksController {
      constructor(private readonly redlock: RedlockService) {}
      @Post('hold/:resource')
      async hold(@Param('resource') resource: string): Promise<{ ok: true }> {
        await this.redlock.using(resource, async () => new Promise((r) => setTimeout(r, 400)));
        return { ok: true };
      }
      @Post('try/:resource')
      async try(@Param('resource') resource: string): Promise<{ contended: boolean }> {
        const lock = await this.redlock.tryAcquire(resource);
        if (lock) await this.redlock.release(lock);
        return { contended: lock === null };
      }
    }

    const { port } = collector.address() as AddressInfo;
    @Module({
      imports: [
        ObserveModule.forRoot({
          appKey: 'offline-test-key',
          appSecret: 'offline-test-secret',
          serviceId: 'nestjs-redlock-test',
          endpoint: `http://127.0.0.1:${port}`,
          flushInterval: 100,
          runtimeMetrics: false,
        }),
        RedlockModule.forRoot({ clients: masters.urls, quarantine: false, telemetry: false }),
      ],
      controllers: [LocksController],
      providers: [ObserveRedlockBridge],
    })
    class AppModule {}

    app = await NestFactory.create(AppModule, {
      logger: ['error'],
      instrument: ObserveInstrument as NestApplicationOptions['instrument'],
    });
    await app.listen(0, '127.0.0.1');
    const url = await app.getUrl();
    const resource = uniqueResource('observe');

    const holding = fetch(`${url}/hold/${resource}`, { method: 'POST' });
    const redlock = app.get(RedlockService);
    await waitUntil(() => redlock.engine.heldLocks.length === 1, 10_000);
    const tried = await fetch(`${url}/try/${resource}`, { method: 'POST' });
    expect(await tried.json()).toEqual({ contended: true });
    expect((await holding).status).toBe(201);

    const spans = (name: string) =>
      batches.flatMap((b) =>
        [...objectsIn(b)].filter(
          (o) =>
            o.n === name && (o.t as Record<string, unknown>)?.['redlock.resources'] === resource,
        ),
      );
    const metric = (name: string) =>
      batches.flatMap((b) =>
        ((b as { custom?: Record<string, unknown>[] }).custom ?? []).filter((c) => c.n === name),
      );
    await waitUntil(
      () =>
        spans('redlock.acquire').length >= 2 &&
        spans('redlock.release').length >= 1 &&
        metric('redlock_acquire_failures').length > 0 &&
        metric('redlock_acquire_wait_ms').length > 0,
      15_000,
    );

    const acquireTags = spans('redlock.acquire').map((s) => s.t as Record<string, unknown>);
    expect(acquireTags.map((t) => t['redlock.outcome']).sort()).toEqual([
      'LOCK_CONTENDED',
      'acquired',
    ]);
    const granted = acquireTags.find((t) => t['redlock.outcome'] === 'acquired')!;
    expect(granted['redlock.votes.ok']).toBeGreaterThanOrEqual(2); // a quorum (the grant need not wait for all)
    expect(typeof granted['redlock.fencing_token']).toBe('number');
    const contended = acquireTags.find((t) => t['redlock.outcome'] === 'LOCK_CONTENDED')!;
    expect(contended['error.type']).toBe('LOCK_CONTENDED');
    expect(contended['redlock.votes.held']).toBeGreaterThanOrEqual(2);
    const release = spans('redlock.release')[0].t as Record<string, unknown>;
    expect(release['redlock.hold_ms']).toBeGreaterThanOrEqual(350);
    expect(release['redlock.released_on']).toBeGreaterThanOrEqual(2);

    const failures = metric('redlock_acquire_failures');
    expect(
      failures.some((f) => (f.v as Record<string, number>)['{"error_type":"LOCK_CONTENDED"}'] >= 1),
    ).toBe(true);
    const waits = metric('redlock_acquire_wait_ms');
    expect(
      waits.reduce((n, w) => n + ((w.ct as Record<string, number>)?.acquired ?? 0), 0),
    ).toBeGreaterThanOrEqual(1);
    expect(JSON.stringify(metric('redlock_acquire_wait_ms'))).not.toContain(resource);
  }, 60_000);
});
