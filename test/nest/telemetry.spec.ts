/**
 * Observability against real masters: OpenTelemetry spans and metrics recorded through the real
 * OpenTelemetry SDK (in-memory exporters), parented on the caller's active span; the module's
 * `telemetry` option (auto, off, explicit providers, validation); and the Nest log lines for
 * lost locks and unavailable quorums (rate-limited, no secrets).
 */
import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import type { LoggerService } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { context, metrics, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { AggregationTemporality, MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import type { DataPoint, Histogram } from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import Redis from 'ioredis';
import { InvalidConfigurationError } from '../../lib/core/base/errors';
import { Redlock } from '../../lib/core/redlock';
import { Locked } from '../../lib/decorators/locked.decorator';
import type { RedlockModuleOptions } from '../../lib/interfaces/redlock-module-options.interface';
import { RedlockModule } from '../../lib/redlock.module';
import { NO_QUORUM_LOG_INTERVAL, logLockEvents } from '../../lib/redlock.logging';
import { instrumentRedlock } from '../../lib/telemetry/opentelemetry';
import type { RedlockTelemetryOptions } from '../../lib/telemetry/opentelemetry';
import { RedisMasters, freePort } from '../harness/redis-masters';
import { uniqueResource, waitUntil } from '../harness/util';

/** A pull reader: metrics are collected when the test asks. */
class TestReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

interface Telemetry {
  spans: InMemorySpanExporter;
  tracerProvider: BasicTracerProvider;
  meterProvider: MeterProvider;
  reader: TestReader;
}

function telemetry(): Telemetry {
  const spans = new InMemorySpanExporter();
  const reader = new TestReader();
  return {
    spans,
    tracerProvider: new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] }),
    meterProvider: new MeterProvider({ readers: [reader] }),
    reader,
  };
}

function providers(t: Telemetry): RedlockTelemetryOptions {
  return { tracerProvider: t.tracerProvider, meterProvider: t.meterProvider };
}

/** Data points of one metric, or [] when it has none yet. */
async function points(t: Telemetry, name: string): Promise<DataPoint<unknown>[]> {
  const { resourceMetrics } = await t.reader.collect();
  for (const scope of resourceMetrics.scopeMetrics) {
    for (const m of scope.metrics) {
      if (m.descriptor.name === name) return m.dataPoints as DataPoint<unknown>[];
    }
  }
  return [];
}

function named(t: Telemetry, name: string): ReadableSpan[] {
  return t.spans.getFinishedSpans().filter((s) => s.name === name);
}

let masters: RedisMasters;
const engines: Redlock[] = [];
const clientsToClose: Redis[] = [];

async function engine(settings: ConstructorParameters<typeof Redlock>[1] = {}): Promise<Redlock> {
  const clients = masters.createClients();
  clientsToClose.push(...clients);
  // requestTimeout: the default 50 ms turned a vote into `timeout` beside a busy core (an
  // extend ended in NoQuorumError); these tests are about what is recorded, not about timing.
  const e = new Redlock(clients, { quarantine: false, requestTimeout: 250, ...settings });
  engines.push(e);
  await RedisMasters.ready(clients);
  return e;
}

beforeAll(async () => {
  masters = await RedisMasters.start(3);
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
});

afterAll(async () => {
  await Promise.all(engines.map((e) => e.close()));
  for (const c of clientsToClose) c.disconnect();
  await masters?.stop();
  context.disable();
  trace.disable();
  metrics.disable();
});

describe('instrumentRedlock (engine)', () => {
  it('records acquire/extend/release spans under the caller span, and wait/hold metrics', async () => {
    const t = telemetry();
    const rl = await engine();
    const stop = instrumentRedlock(rl, providers(t));
    const r = uniqueResource('otel');
    const request = t.tracerProvider.getTracer('app');
    const parent = await request.startActiveSpan('POST /orders', async (span) => {
      const lock = await rl.acquire(r);
      await rl.extend(lock, 5000);
      await rl.release(lock);
      span.end();
      return span.spanContext();
    });

    const [acquire] = named(t, 'redlock.acquire');
    expect(acquire.parentSpanContext?.spanId).toBe(parent.spanId);
    expect(acquire.spanContext().traceId).toBe(parent.traceId);
    expect(acquire.attributes).toMatchObject({
      'redlock.resources': [r],
      'redlock.outcome': 'acquired',
      'redlock.attempts': 1,
      'redlock.quorum': 2,
      'redlock.votes.ok': expect.any(Number),
    });
    expect(acquire.attributes['redlock.fencing_token']).toEqual(expect.any(Number));
    expect(acquire.status.code).toBe(0); // UNSET
    const [extend] = named(t, 'redlock.extend');
    expect(extend.attributes).toMatchObject({ 'redlock.ttl': 5000, 'redlock.extensions': 1 });
    const [release] = named(t, 'redlock.release');
    expect(release.parentSpanContext?.spanId).toBe(parent.spanId);
    expect(release.attributes['redlock.released_on']).toBeGreaterThanOrEqual(2);

    const waits = await points(t, 'redlock.acquire.duration');
    expect(waits).toHaveLength(1);
    expect(waits[0].attributes).toEqual({ 'redlock.outcome': 'acquired' });
    expect((waits[0].value as Histogram).count).toBe(1);
    const holds = await points(t, 'redlock.lock.hold.duration');
    expect(holds[0].attributes).toEqual({ 'redlock.outcome': 'released' });
    expect((await points(t, 'redlock.lock.extensions'))[0].value).toBe(1);
    // Metrics never carry resource names (cardinality).
    for (const name of ['redlock.acquire.duration', 'redlock.lock.hold.duration']) {
      for (const p of await points(t, name))
        expect(Object.keys(p.attributes)).not.toContain('redlock.resources');
    }

    stop();
    await rl.release(await rl.acquire(uniqueResource('after-stop')));
    expect(named(t, 'redlock.acquire')).toHaveLength(1);
  });

  it('records contention as a failed acquire span and a failure count by error type', async () => {
    const t = telemetry();
    const holder = await engine();
    const rl = await engine({ retryDelay: 20, retryJitter: 5 });
    instrumentRedlock(rl, providers(t));
    const r = uniqueResource('contended');
    const held = await holder.acquire(r);
    await expect(rl.tryAcquire(r)).resolves.toBeNull();
    await expect(rl.acquire(r, { retryCount: 2 })).rejects.toThrow(/locked by another holder/);
    await holder.release(held);

    const failed = named(t, 'redlock.acquire');
    expect(failed).toHaveLength(2);
    for (const span of failed) {
      expect(span.status.code).toBe(2); // ERROR
      expect(span.attributes).toMatchObject({
        'redlock.outcome': 'LOCK_CONTENDED',
        'error.type': 'LOCK_CONTENDED',
        'redlock.votes.held': expect.any(Number),
      });
    }
    expect(failed.map((s) => s.attributes['redlock.attempts']).sort()).toEqual([1, 3]);
    const failures = await points(t, 'redlock.acquire.failures');
    expect(failures).toEqual([
      expect.objectContaining({ attributes: { 'error.type': 'LOCK_CONTENDED' }, value: 2 }),
    ]);
  });

  it('counts lost locks and held locks, and can leave resource names off spans', async () => {
    const t = telemetry();
    const rl = await engine();
    instrumentRedlock(rl, { ...providers(t), resourceAttributes: false });
    const [a, b] = [uniqueResource('held-a'), uniqueResource('held-b')];
    const la = await rl.acquire(a);
    // 500 ms, not 200: b must still be held when the gauge is read (a 200 ms stall lost it first)
    const lb = await rl.acquire(b, { ttl: 500 });
    expect((await points(t, 'redlock.locks.held'))[0].value).toBe(2);
    // Nobody extends b: its validity ends, the engine reports it lost.
    await waitUntil(() => !lb.isValid);
    await waitUntil(async () => (await points(t, 'redlock.lock.lost')).length > 0);
    expect((await points(t, 'redlock.lock.lost'))[0].value).toBe(1);
    await rl.release(lb);
    await rl.release(la);
    const holds = await points(t, 'redlock.lock.hold.duration');
    expect(
      holds.map((p) => [p.attributes['redlock.outcome'], (p.value as Histogram).count]),
    ).toEqual(
      expect.arrayContaining([
        ['lost', 1],
        ['released', 1],
      ]),
    );
    expect((await points(t, 'redlock.locks.held'))[0].value).toBe(0);
    for (const span of t.spans.getFinishedSpans()) {
      expect(span.attributes['redlock.resources']).toBeUndefined();
    }
  });

  it('rejects bad options with a typed error', async () => {
    const rl = await engine();
    expect(() => instrumentRedlock(rl, { traces: 'yes' } as never)).toThrow(
      InvalidConfigurationError,
    );
    expect(() => instrumentRedlock(rl, { tracerProvider: {} } as never)).toThrow(
      /tracerProvider.*getTracer/,
    );
    expect(() => instrumentRedlock(rl, { sampler: 1 } as never)).toThrow(/unknown option/);
  });
});

describe('RedlockModule telemetry option', () => {
  @Injectable()
  class Job {
    @Locked('job:{args.0}')
    async run(id: string): Promise<string> {
      return id;
    }
  }

  async function boot(extra: Partial<RedlockModuleOptions>) {
    const moduleRef = await Test.createTestingModule({
      imports: [RedlockModule.forRoot({ clients: masters.urls, quarantine: false, ...extra })],
      providers: [Job],
    }).compile();
    await moduleRef.init();
    return moduleRef;
  }

  it('is on by default when @opentelemetry/api is installed (global providers), off with false', async () => {
    const t = telemetry();
    trace.setGlobalTracerProvider(t.tracerProvider);
    metrics.setGlobalMeterProvider(t.meterProvider);
    try {
      for (const option of [undefined, false] as const) {
        const app = await boot({ telemetry: option });
        const id = uniqueResource('auto');
        await app.get(Job).run(id);
        await app.close();
        const spans = named(t, 'redlock.acquire').filter((s) =>
          (s.attributes['redlock.resources'] as string[]).includes(`job:${id}`),
        );
        expect(spans).toHaveLength(option === false ? 0 : 1);
      }
    } finally {
      trace.disable();
      metrics.disable();
    }
  });

  it('uses explicit providers, and validates the option at startup', async () => {
    const t = telemetry();
    const app = await boot({ telemetry: { tracerProvider: t.tracerProvider, metrics: false } });
    const id = uniqueResource('explicit');
    await app.get(Job).run(id);
    await app.close();
    expect(named(t, 'redlock.acquire').map((s) => s.attributes['redlock.resources'])).toEqual([
      [`job:${id}`],
    ]);
    expect(named(t, 'redlock.release')).toHaveLength(1);
    await expect(boot({ telemetry: 'on' as never })).rejects.toThrow(InvalidConfigurationError);
    await expect(boot({ telemetry: { meterProvider: null } as never })).rejects.toThrow(
      /telemetry\.meterProvider/,
    );
  });
});

describe('Nest log lines (logLockEvents)', () => {
  class Recorder implements Pick<LoggerService, 'warn'> {
    readonly lines: string[] = [];
    warn(m: unknown): void {
      this.lines.push(String(m));
    }
  }

  it('warns about every lost lock', async () => {
    const rl = await engine();
    const log = new Recorder();
    const stop = logLockEvents(rl, log);
    const r = uniqueResource('lost');
    const lock = await rl.acquire(r, { ttl: 100 });
    await waitUntil(() => log.lines.length > 0);
    expect(log.lines[0]).toContain(`Lock on "${r}" lost`);
    expect(log.lines[0]).toContain('fencing');
    await rl.release(lock);
    stop();
  });

  it('warns about an unavailable quorum at most once per interval, counting the rest', async () => {
    const password = 's3cret-otel';
    const ports = await Promise.all([freePort(), freePort(), freePort()]);
    const clients = ports.map(
      (port) =>
        new Redis({
          port,
          host: '127.0.0.1',
          password,
          enableOfflineQueue: false,
          maxRetriesPerRequest: 0,
          retryStrategy: () => null,
        }),
    );
    clients.forEach((c) => c.on('error', () => undefined));
    clientsToClose.push(...clients);
    const down = new Redlock(clients, { quarantine: false, requestTimeout: 20 });
    engines.push(down);
    const log = new Recorder();
    let now = 1_000_000;
    logLockEvents(down, log, () => now);
    const fail = () => down.tryAcquire(uniqueResource('outage')).catch(() => undefined);
    await fail();
    await fail();
    await fail();
    expect(log.lines).toHaveLength(1);
    expect(log.lines[0]).toMatch(/^Lock unavailable: No quorum/);
    now += NO_QUORUM_LOG_INTERVAL;
    await fail();
    expect(log.lines).toHaveLength(2);
    expect(log.lines[1]).toContain('(2 similar failures since the last report)');
    expect(log.lines.join('\n')).not.toContain(password);
  });
});
