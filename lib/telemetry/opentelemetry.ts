import { requireOptional } from '../optional-peer';
import { VERSION } from '../version';
import { performance } from 'node:perf_hooks';
import { monotonicNow } from '../core/base/clock';
import { InvalidConfigurationError, RedlockError } from '../core/base/errors';
import type { NodeVote } from '../core/base/errors';
import type { RedlockEvent } from '../core/lock/events';
import type { Redlock } from '../core/redlock';
import { describe } from '../core/base/validate';

/*
 * OpenTelemetry integration. `@opentelemetry/api` is an optional peer dependency: it is loaded
 * with `require()` only when instrumentation is switched on, and only the handful of API
 * members below are used — typed structurally, so that nothing in our public typings refers to
 * the package (apps without it compile and run unchanged).
 */

/** Attribute values we record (a subset of OpenTelemetry's `AttributeValue`). */
export type TelemetryAttributeValue = string | number | boolean | string[];

/** Attributes of a span or a measurement. */
export type TelemetryAttributes = Record<string, TelemetryAttributeValue>;

/** The part of an OpenTelemetry `Span` used here. */
export interface TelemetrySpan {
  setStatus(status: { code: number; message?: string }): unknown;
  end(endTime?: number): void;
}

/** The part of an OpenTelemetry `Tracer` used here. */
export interface TelemetryTracer {
  startSpan(
    name: string,
    options?: { kind?: number; startTime?: number; attributes?: TelemetryAttributes },
  ): TelemetrySpan;
}

/** The part of an OpenTelemetry `TracerProvider` used here (e.g. `trace.getTracerProvider()`). */
export interface TelemetryTracerProvider {
  getTracer(name: string, version?: string): TelemetryTracer;
}

/** A histogram instrument. */
export interface TelemetryHistogram {
  record(value: number, attributes?: TelemetryAttributes): void;
}

/** A counter instrument. */
export interface TelemetryCounter {
  add(value: number, attributes?: TelemetryAttributes): void;
}

/** What an observable instrument's callback receives. */
export interface TelemetryObservableResult {
  observe(value: number, attributes?: TelemetryAttributes): void;
}

/** An observable instrument. */
export interface TelemetryObservable {
  addCallback(callback: (result: TelemetryObservableResult) => void): void;
  removeCallback(callback: (result: TelemetryObservableResult) => void): void;
}

/** Options of a metric instrument. */
export interface TelemetryInstrumentOptions {
  description?: string;
  unit?: string;
  advice?: { explicitBucketBoundaries?: number[] };
}

/** The part of an OpenTelemetry `Meter` used here. */
export interface TelemetryMeter {
  createHistogram(name: string, options?: TelemetryInstrumentOptions): TelemetryHistogram;
  createCounter(name: string, options?: TelemetryInstrumentOptions): TelemetryCounter;
  createObservableUpDownCounter(
    name: string,
    options?: TelemetryInstrumentOptions,
  ): TelemetryObservable;
}

/** The part of an OpenTelemetry `MeterProvider` used here (e.g. `metrics.getMeterProvider()`). */
export interface TelemetryMeterProvider {
  getMeter(name: string, version?: string): TelemetryMeter;
}

/** Options of {@link instrumentRedlock} (and of the module's `telemetry` option). */
export interface RedlockTelemetryOptions {
  /** Record spans (`redlock.acquire`, `redlock.release`, `redlock.extend`). Default `true`. */
  readonly traces?: boolean;
  /** Record metrics (see {@link instrumentRedlock}). Default `true`. */
  readonly metrics?: boolean;
  /**
   * Put the resource names on spans (`redlock.resources`). Default `true`; switch off when
   * resource names carry personal data. Metrics never carry resource names (cardinality).
   */
  readonly resourceAttributes?: boolean;
  /** Tracer provider to use instead of the global one registered with `@opentelemetry/api`. */
  readonly tracerProvider?: TelemetryTracerProvider;
  /** Meter provider to use instead of the global one registered with `@opentelemetry/api`. */
  readonly meterProvider?: TelemetryMeterProvider;
}

/** Instrumentation scope name of the spans and metrics. */
export const TELEMETRY_SCOPE = 'nestjs-redlock';

const SPAN_STATUS_ERROR = 2; // SpanStatusCode.ERROR, stable in the OpenTelemetry specification
const OPTION_KEYS = new Set([
  'traces',
  'metrics',
  'resourceAttributes',
  'tracerProvider',
  'meterProvider',
]);

/** What `@opentelemetry/api` exports that we use. */
interface OpenTelemetryApi {
  trace: { getTracerProvider(): TelemetryTracerProvider };
  metrics: { getMeterProvider(): TelemetryMeterProvider };
}

/**
 * Loads `@opentelemetry/api` if it is installed, else `undefined`. Nothing is loaded (or paid
 * for) until this is called.
 */
export function loadOpenTelemetry(): OpenTelemetryApi | undefined {
  const api = requireOptional<Partial<OpenTelemetryApi>>('@opentelemetry/api');
  return api?.trace && api.metrics ? (api as OpenTelemetryApi) : undefined;
}

/**
 * Checks telemetry options (module option `telemetry` or {@link instrumentRedlock}'s argument).
 * Throws {@link InvalidConfigurationError} naming the offending field.
 */
export function checkTelemetryOptions(
  options: unknown,
  field = 'telemetry',
): RedlockTelemetryOptions {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidConfigurationError(field, `must be an object, got ${describe(options)}`);
  }
  const o = options as Record<string, unknown>;
  for (const key of Object.keys(o)) {
    if (!OPTION_KEYS.has(key))
      throw new InvalidConfigurationError(
        `${field}.${key}`,
        `unknown option; valid names are ${[...OPTION_KEYS].join(', ')}`,
      );
  }
  for (const key of ['traces', 'metrics', 'resourceAttributes']) {
    if (o[key] !== undefined && typeof o[key] !== 'boolean') {
      throw new InvalidConfigurationError(
        `${field}.${key}`,
        `must be a boolean, got ${describe(o[key])}`,
      );
    }
  }
  const provider = (key: string, method: string): void => {
    const p = o[key] as Record<string, unknown> | undefined;
    if (p !== undefined && (p === null || typeof p[method] !== 'function')) {
      throw new InvalidConfigurationError(
        `${field}.${key}`,
        `must have a ${method}() method (an OpenTelemetry provider), got ${describe(p)}`,
      );
    }
  };
  provider('tracerProvider', 'getTracer');
  provider('meterProvider', 'getMeter');
  return o as RedlockTelemetryOptions;
}

/**
 * Reports an engine's activity to OpenTelemetry, through {@link Redlock.observe}:
 *
 * **Spans** (children of the span active where the call was made, timed like the operation):
 * - `redlock.acquire` — from the call to the grant or the failure, retries included; attributes
 *   `redlock.resources`, `redlock.attempts`, `redlock.outcome` (`acquired` or the error code),
 *   `redlock.quorum`, `redlock.votes.ok` / `.held` / `.unavailable`, `redlock.fencing_token`
 *   (single resource); status ERROR with `error.type` on failure (contention included);
 * - `redlock.release` — with `redlock.hold_time_ms`, `redlock.released_on` (masters);
 * - `redlock.extend` — with `redlock.ttl`, `redlock.extensions`.
 *
 * **Metrics** (never with resource names, to keep cardinality bounded):
 * - `redlock.acquire.duration` (histogram, s) by `redlock.outcome` — the wait for a lock;
 * - `redlock.acquire.failures` (counter) by `error.type`;
 * - `redlock.lock.hold.duration` (histogram, s) by `redlock.outcome` (`released` / `lost`);
 * - `redlock.lock.extensions` (counter), `redlock.lock.lost` (counter);
 * - `redlock.locks.held` (observable up-down counter) — locks this engine holds now.
 *
 * Uses the global tracer/meter providers of `@opentelemetry/api` unless providers are given;
 * throws {@link InvalidConfigurationError} when neither is available. Costs nothing until called.
 * Returns a function that stops the instrumentation.
 */
export function instrumentRedlock(
  engine: Redlock,
  options: RedlockTelemetryOptions = {},
): () => void {
  const o = checkTelemetryOptions(options, 'options');
  const traces = o.traces ?? true;
  const metrics = o.metrics ?? true;
  const needsApi = (traces && !o.tracerProvider) || (metrics && !o.meterProvider);
  const api = needsApi ? loadOpenTelemetry() : undefined;
  if (needsApi && !api) {
    throw new InvalidConfigurationError(
      'telemetry',
      'needs the package @opentelemetry/api (npm install @opentelemetry/api), or explicit providers',
    );
  }
  const withResources = o.resourceAttributes ?? true;
  // Tracer and instruments are made on the first event, not now: an SDK registered after the
  // module was created (but before the first lock) is still used.
  let ready: { tracer?: TelemetryTracer; instruments?: Instruments } | undefined;
  const observeHeld = (result: TelemetryObservableResult): void =>
    result.observe(engine.heldLocks.length);
  const setup = (): { tracer?: TelemetryTracer; instruments?: Instruments } => {
    if (ready) return ready;
    const version = packageVersion();
    const tracer = traces
      ? (o.tracerProvider ?? api!.trace.getTracerProvider()).getTracer(TELEMETRY_SCOPE, version)
      : undefined;
    const meter = metrics
      ? (o.meterProvider ?? api!.metrics.getMeterProvider()).getMeter(TELEMETRY_SCOPE, version)
      : undefined;
    const instruments = meter && createInstruments(meter);
    instruments?.held.addCallback(observeHeld);
    return (ready = { tracer, instruments });
  };

  const span = (
    name: string,
    durationMs: number,
    attributes: TelemetryAttributes,
    error?: RedlockError,
  ): void => {
    const { tracer } = setup();
    if (!tracer) return;
    const end = performance.timeOrigin + monotonicNow();
    const s = tracer.startSpan(name, { startTime: end - durationMs, attributes });
    if (error) s.setStatus({ code: SPAN_STATUS_ERROR, message: error.message });
    s.end(end);
  };
  const resourcesOf = (resources: readonly string[]): TelemetryAttributes =>
    withResources ? { 'redlock.resources': [...resources] } : {};

  const lost = new WeakSet<object>();
  const stop = engine.observe((event: RedlockEvent) => {
    const { instruments } = setup();
    switch (event.type) {
      case 'acquired': {
        const tokens = Object.values(event.lock.fencingTokens);
        span('redlock.acquire', event.waitTime, {
          'redlock.outcome': 'acquired',
          'redlock.attempts': event.attempts,
          'redlock.quorum': engine.quorum,
          ...voteCounts(event.votes),
          ...(tokens.length === 1 ? { 'redlock.fencing_token': tokens[0] } : {}),
          ...resourcesOf(event.resources),
        });
        instruments?.acquire.record(event.waitTime / 1000, { 'redlock.outcome': 'acquired' });
        break;
      }
      case 'failed': {
        const code = event.error.code;
        span(
          'redlock.acquire',
          event.waitTime,
          {
            'redlock.outcome': code,
            'error.type': code,
            'redlock.attempts': event.attempts,
            'redlock.quorum': engine.quorum,
            ...voteCounts(event.votes),
            ...resourcesOf(event.resources),
          },
          event.error,
        );
        instruments?.acquire.record(event.waitTime / 1000, {
          'redlock.outcome': code,
          'error.type': code,
        });
        instruments?.failures.add(1, { 'error.type': code });
        break;
      }
      case 'extended':
        span('redlock.extend', event.duration, {
          'redlock.ttl': event.ttl,
          'redlock.extensions': event.extensions,
          ...resourcesOf(event.resources),
        });
        instruments?.extensions.add(1);
        break;
      case 'released':
        span('redlock.release', event.duration, {
          'redlock.hold_time_ms': Math.round(event.holdTime),
          'redlock.released_on': event.result.deleted,
          ...resourcesOf(event.resources),
        });
        instruments?.hold.record(event.holdTime / 1000, {
          'redlock.outcome': lost.has(event.lock) ? 'lost' : 'released',
        });
        break;
      case 'lost':
        lost.add(event.lock);
        instruments?.lost.add(1);
        break;
    }
  });
  return () => {
    stop();
    ready?.instruments?.held.removeCallback(observeHeld);
  };
}

interface Instruments {
  readonly acquire: TelemetryHistogram;
  readonly failures: TelemetryCounter;
  readonly hold: TelemetryHistogram;
  readonly extensions: TelemetryCounter;
  readonly lost: TelemetryCounter;
  readonly held: TelemetryObservable;
}

function createInstruments(meter: TelemetryMeter): Instruments {
  const seconds = { unit: 's', advice: { explicitBucketBoundaries: SECONDS_BUCKETS } };
  return {
    acquire: meter.createHistogram('redlock.acquire.duration', {
      description: 'Time from an acquire call to the grant or the failure, retries included',
      ...seconds,
    }),
    failures: meter.createCounter('redlock.acquire.failures', {
      description: 'Acquisitions that did not get the lock, by error type',
    }),
    hold: meter.createHistogram('redlock.lock.hold.duration', {
      description: 'Time a lock was held, from the grant to its release',
      ...seconds,
    }),
    extensions: meter.createCounter('redlock.lock.extensions', {
      description: 'Successful lock extensions',
    }),
    lost: meter.createCounter('redlock.lock.lost', {
      description: 'Locks that ended before their release (validity over, or lost on a majority)',
    }),
    held: meter.createObservableUpDownCounter('redlock.locks.held', {
      description: 'Locks this process holds',
    }),
  };
}

/** Bucket boundaries (s) for lock waits and holds: 1 ms … 5 min. */
const SECONDS_BUCKETS = [
  0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
];

/** Vote counts of a lock operation as span attributes (shared with nest-observe.ts). */
export function voteCounts(votes: readonly NodeVote[]): TelemetryAttributes {
  let ok = 0;
  let held = 0;
  let unavailable = 0;
  for (const v of votes) {
    if (v.outcome === 'ok') ok++;
    else if (v.outcome === 'held') held++;
    // A repaired master answered and holds our key again: neither a holder nor an outage.
    else if (v.outcome !== 'pending' && v.outcome !== 'repaired') unavailable++;
  }
  return {
    'redlock.votes.ok': ok,
    'redlock.votes.held': held,
    'redlock.votes.unavailable': unavailable,
  };
}

/** This package's version (the instrumentation scope version). */
function packageVersion(): string {
  return VERSION;
}
