import type { DynamicModule } from '@nestjs/common';
import type { RedlockModuleOptions } from '../lib/interfaces/redlock-module-options.interface';

/** Injection token of the resolved {@link SampleOptions}. */
export const SAMPLE_OPTIONS = Symbol('SAMPLE_OPTIONS');

/** Durations the sample simulates (all in ms). Tests shrink them; `npm run sample` uses the defaults. */
export interface SampleTimings {
  /** Latency of the (simulated) payment provider. Default 300. */
  paymentMs: number;
  /** Latency of a stock write (widens the read-modify-write window). Default 20. */
  stockWriteMs: number;
  /** Reservations older than this are expired by the janitor. Default 15 minutes. */
  reservationTtlMs: number;
  /** Ttl of the report lock; the report runs {@link reportMs}, so it must be extended. Default 1000. */
  reportTtlMs: number;
  /** Duration of a report run. Default 3 × {@link reportTtlMs}. */
  reportMs: number;
  /** Interval between two fulfilment (SSE) events. Default 500. */
  fulfilmentStepMs: number;
  /** Duration of the shipping (RPC) and annotation (WebSocket) handlers. Default 300. */
  handlerMs: number;
}

/** Options of `SampleModule.register()`. */
export interface SampleOptions {
  /** Options of `RedlockModule.forRoot()`: the lock masters and engine settings. */
  redlock?: RedlockModuleOptions;
  /**
   * A ready-made lock module used instead of `RedlockModule.forRoot(redlock)`, e.g.
   * `RedlockTestingModule.forRoot()` for tests without Redis.
   */
  redlockModule?: DynamicModule;
  /** The data store: a Redis URL shared by every instance, or `'memory'` (one instance only). */
  store: string;
  /** Prefix of every data key, so that apps sharing a store can keep apart. Default `'sample:'`. */
  namespace?: string;
  /** Name of this instance in records (janitor runs, charges). Default `host:pid`. */
  instanceId?: string;
  /** Run the `@Cron` janitor. Default `true`. */
  scheduler?: boolean;
  /** Simulated durations. */
  timings?: Partial<SampleTimings>;
}

/** {@link SampleOptions} with defaults filled in. */
export interface ResolvedSampleOptions {
  readonly namespace: string;
  readonly instanceId: string;
  readonly timings: Readonly<SampleTimings>;
}

/** Fills in the defaults of {@link SampleOptions}. */
export function resolveSampleOptions(options: SampleOptions): ResolvedSampleOptions {
  const t = options.timings ?? {};
  const reportTtlMs = t.reportTtlMs ?? 1000;
  return {
    namespace: options.namespace ?? 'sample:',
    instanceId: options.instanceId ?? `${process.env.HOSTNAME ?? 'local'}:${process.pid}`,
    timings: {
      paymentMs: t.paymentMs ?? 300,
      stockWriteMs: t.stockWriteMs ?? 20,
      reservationTtlMs: t.reservationTtlMs ?? 15 * 60_000,
      reportTtlMs,
      reportMs: t.reportMs ?? 3 * reportTtlMs,
      fulfilmentStepMs: t.fulfilmentStepMs ?? 500,
      handlerMs: t.handlerMs ?? 300,
    },
  };
}
