import { InvalidConfigurationError } from '../core/base/errors';
import type { RedlockErrorCode } from '../core/base/errors';
import type { RedlockEvent } from '../core/lock/events';
import type { Redlock } from '../core/redlock';
import { describe } from '../core/base/validate';
import { voteCounts } from './opentelemetry';

/*
 * NestJS Observe (`@nestjs/observe`, Nest 12's observability agent) integration. The package is
 * not a dependency of ours: the application passes its `TracerService` (injected from Observe's
 * global module), typed here structurally with only the members used below.
 *
 * Observe already records a span for every provider method and handler, so the time a request
 * spent waiting for a lock is part of the span of the method that waited. Its manual spans are
 * timed by Observe around a callback and cannot be given a past start, so the lock's own
 * figures (wait, hold, votes) travel as tags of a `redlock.*` span recorded when the event
 * happens, and as custom metrics.
 */

/** A tag value Observe accepts. */
export type NestObserveTagValue = string | number | boolean;

/** The part of Observe's `TraceSpanDelegate` used here. */
export interface NestObserveSpan {
  addTags(tags: Record<string, NestObserveTagValue>): unknown;
}

/** The part of Observe's `Counter` used here. */
export interface NestObserveCounter {
  increment(label: Record<string, string>): void;
}

/** The part of Observe's `Summary` used here. */
export interface NestObserveSummary {
  observe(value: number, label: string): void;
}

/** The part of Observe's `Gauge` used here. */
export interface NestObserveGauge {
  setValue(value: number): void;
}

/** The part of Observe's `TracerService` used here. */
export interface NestObserveTracer {
  currentTraceId(): string | null;
  createSpan(name: string, callback: (span: NestObserveSpan) => unknown): Promise<unknown>;
  counter(
    name: string,
    attributes: { description?: string; labels?: string[] },
  ): NestObserveCounter;
  summary(
    name: string,
    attributes: { description?: string; labels?: string[] },
  ): NestObserveSummary;
  gauge(name: string, attributes: { description?: string; kind?: 'additive' }): NestObserveGauge;
}

/** Options of {@link reportToNestObserve}. */
export interface NestObserveReportOptions {
  /** Record `redlock.acquire` / `redlock.release` / `redlock.extend` spans. Default `true`. */
  readonly traces?: boolean;
  /** Record the custom metrics (see {@link reportToNestObserve}). Default `true`. */
  readonly metrics?: boolean;
  /**
   * Put the resource names on spans (`redlock.resources`). Default `true`; switch off when
   * resource names carry personal data. Metrics never carry resource names (cardinality).
   */
  readonly resourceAttributes?: boolean;
}

const OUTCOMES: Record<'acquired' | RedlockErrorCode, true> = {
  acquired: true,
  LOCK_CONTENDED: true,
  NO_QUORUM: true,
  LOCK_LOST: true,
  WAIT_TIMEOUT: true,
  ABORTED: true,
  EXTENSION_LIMIT: true,
  SHUTTING_DOWN: true,
  KIND_MISMATCH: true,
  INVALID_ARGUMENT: true,
  INVALID_CONFIGURATION: true,
};

/**
 * Reports an engine's activity (e.g. `RedlockService.engine`) to NestJS Observe through the
 * application's `TracerService`:
 *
 * **Spans**, only inside an operation Observe traces (a request, message, job), under the span
 * of the method that took the lock:
 * - `redlock.acquire` — tags `redlock.outcome` (`acquired` or the error code), `error.type` on
 *   failure, `redlock.wait_ms`, `redlock.attempts`, `redlock.votes.ok` / `.held` /
 *   `.unavailable`, `redlock.fencing_token` (single resource), `redlock.resources`;
 * - `redlock.release` — `redlock.hold_ms`, `redlock.release_ms`, `redlock.released_on`;
 * - `redlock.extend` — `redlock.ttl`, `redlock.extensions`, `redlock.extend_ms`.
 *
 * **Custom metrics** (never with resource names):
 * - `redlock_acquire_wait_ms` (summary) by outcome (`acquired` or the error code);
 * - `redlock_acquire_failures` (counter) by `error_type`;
 * - `redlock_lock_hold_ms` (summary) by `released` / `lost`;
 * - `redlock_lock_extensions`, `redlock_lock_lost` (counters);
 * - `redlock_locks_held` (additive gauge) — locks this process holds.
 *
 * Never throws into the engine: a failing report is dropped. Returns a function that stops it.
 */
export function reportToNestObserve(
  engine: Redlock,
  tracer: NestObserveTracer,
  options: NestObserveReportOptions = {},
): () => void {
  const o = checkOptions(tracer, options);
  const traces = o.traces ?? true;
  const metrics = o.metrics ?? true;
  const withResources = o.resourceAttributes ?? true;
  const m = metrics ? createMetrics(tracer) : undefined;

  const span = (
    name: string,
    resources: readonly string[],
    tags: Record<string, NestObserveTagValue>,
  ) => {
    if (!traces || tracer.currentTraceId() === null) return;
    const all = withResources ? { 'redlock.resources': resources.join(','), ...tags } : tags;
    tracer
      .createSpan(name, (s) => {
        s.addTags(all);
      })
      .catch(() => undefined);
  };

  const lost = new WeakSet<object>();
  return engine.observe((event: RedlockEvent) => {
    try {
      switch (event.type) {
        case 'acquired': {
          const tokens = Object.values(event.lock.fencingTokens);
          span('redlock.acquire', event.resources, {
            'redlock.outcome': 'acquired',
            'redlock.wait_ms': Math.round(event.waitTime),
            'redlock.attempts': event.attempts,
            ...voteCounts(event.votes),
            ...(tokens.length === 1 ? { 'redlock.fencing_token': tokens[0] } : {}),
          });
          m?.wait.observe(event.waitTime, 'acquired');
          m?.held.setValue(engine.heldLocks.length);
          break;
        }
        case 'failed': {
          const code = event.error.code;
          span('redlock.acquire', event.resources, {
            'redlock.outcome': code,
            'error.type': code,
            'redlock.wait_ms': Math.round(event.waitTime),
            'redlock.attempts': event.attempts,
            ...voteCounts(event.votes),
          });
          m?.wait.observe(event.waitTime, code);
          m?.failures.increment({ error_type: code });
          break;
        }
        case 'extended':
          span('redlock.extend', event.resources, {
            'redlock.ttl': event.ttl,
            'redlock.extensions': event.extensions,
            'redlock.extend_ms': Math.round(event.duration),
          });
          m?.extensions.increment({});
          break;
        case 'released':
          span('redlock.release', event.resources, {
            'redlock.hold_ms': Math.round(event.holdTime),
            'redlock.release_ms': Math.round(event.duration),
            'redlock.released_on': event.result.deleted,
          });
          m?.hold.observe(event.holdTime, lost.has(event.lock) ? 'lost' : 'released');
          m?.held.setValue(engine.heldLocks.length);
          break;
        case 'lost':
          lost.add(event.lock);
          m?.lost.increment({});
          m?.held.setValue(engine.heldLocks.length);
          break;
      }
    } catch {
      // Telemetry never breaks locking (e.g. a metric refused by the agent).
    }
  });
}

function createMetrics(tracer: NestObserveTracer) {
  return {
    wait: tracer.summary('redlock_acquire_wait_ms', {
      description:
        'Milliseconds from an acquire call to the grant or the failure, retries included',
      labels: Object.keys(OUTCOMES),
    }),
    failures: tracer.counter('redlock_acquire_failures', {
      description: 'Acquisitions that did not get the lock, by error type',
      labels: ['error_type'],
    }),
    hold: tracer.summary('redlock_lock_hold_ms', {
      description: 'Milliseconds a lock was held, from the grant to its release',
      labels: ['released', 'lost'],
    }),
    extensions: tracer.counter('redlock_lock_extensions', {
      description: 'Successful lock extensions',
    }),
    lost: tracer.counter('redlock_lock_lost', {
      description: 'Locks that ended before their release (validity over, or lost on a majority)',
    }),
    held: tracer.gauge('redlock_locks_held', {
      description: 'Locks this process holds',
      kind: 'additive',
    }),
  };
}

function checkOptions(tracer: unknown, options: unknown): NestObserveReportOptions {
  const t = tracer as Record<string, unknown> | null | undefined;
  for (const method of ['currentTraceId', 'createSpan', 'counter', 'summary', 'gauge']) {
    if (t === null || typeof t !== 'object' || typeof t[method] !== 'function') {
      throw new InvalidConfigurationError(
        'tracer',
        `must be @nestjs/observe's TracerService (no ${method}() method), got ${describe(tracer)}`,
      );
    }
  }
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidConfigurationError('options', `must be an object, got ${describe(options)}`);
  }
  const known = ['traces', 'metrics', 'resourceAttributes'];
  for (const [key, value] of Object.entries(options)) {
    if (!known.includes(key)) {
      throw new InvalidConfigurationError(
        `options.${key}`,
        `unknown option; valid names are ${known.join(', ')}`,
      );
    }
    if (value !== undefined && typeof value !== 'boolean') {
      throw new InvalidConfigurationError(
        `options.${key}`,
        `must be a boolean, got ${describe(value)}`,
      );
    }
  }
  return options as NestObserveReportOptions;
}
