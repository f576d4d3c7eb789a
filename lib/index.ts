/**
 * nestjs-redlock public API: the Nest module, service, decorator and interceptor, the
 * framework-free engine, its options, lock and event types, and the errors. Everything else is
 * internal; `nestjs-redlock/testing` and `nestjs-redlock/health` are separate entry points. The
 * committed API report (`api/`) is compared in CI, so a change of this surface is deliberate.
 * @packageDocumentation
 */

// The Nest module, service, decorator, interceptor and exception filter.
export { RedlockModule } from './redlock.module';
export type {
  RedlockModuleExtras,
  RedlockModuleForRootOptions,
  RedlockModuleAsyncOptions,
} from './redlock.module-definition';
export { RedlockService } from './redlock.service';
export { LockedRunner } from './locked/locked-runner';
export type { LockedEntry, EnterLockedOptions } from './locked/locked-runner';
export { Locked } from './decorators/locked.decorator';
export { LockedInterceptor } from './interceptors/locked.interceptor';
export type { LockedContextType } from './interceptors/locked.interceptor';
export { LockErrorFilter } from './errors/lock-error.filter';
export type { LockFailure } from './errors/lock-failure';
export type {
  LockContext,
  OnLocked,
  LockedCallContext,
  LockedResourceFactory,
  LockedResources,
  LockedOptions,
  LockedMetadata,
  RedlockClientOption,
  ContentionStatus,
  RedlockModuleOptions,
  ResolvedLockedDefaults,
  ResolvedRedlockModuleOptions,
  RedlockOptionsFactory,
} from './interfaces';
export {
  LOCKED_METADATA,
  REDLOCK_MODULE_OPTIONS,
  REDLOCK_LOGGER_CONTEXT,
} from './redlock.constants';
export { DEFAULT_SHUTDOWN_TIMEOUT, LOCK_FRIENDLY_CLIENT_OPTIONS } from './options';

// Transport exceptions and their default messages.
export { ResourceLockedException } from './errors/resource-locked.error';
export type { LockHttpErrorBody } from './errors/resource-locked.error';
export { LockUnavailableException } from './errors/lock-unavailable.error';
export type { LockErrorCode, LockErrorPayload } from './errors/transport.error';
export {
  RESOURCE_LOCKED_MESSAGE,
  LOCK_UNAVAILABLE_MESSAGE,
  LOCK_LOST_MESSAGE,
  SHUTTING_DOWN_MESSAGE,
  KIND_MISMATCH_MESSAGE,
  INVALID_LOCK_RESOURCE_MESSAGE,
} from './redlock.messages';

// The framework-free engine.
export * from './core';

// NestJS Observe (Nest 12's observability agent; structural types, no dependency).
export { reportToNestObserve } from './telemetry/nest-observe';
export type { NestObserveReportOptions, NestObserveTracer } from './telemetry/nest-observe';

// OpenTelemetry (optional peer; structural types, so nothing here refers to the package).
export { instrumentRedlock, TELEMETRY_SCOPE } from './telemetry/opentelemetry';
export type {
  RedlockTelemetryOptions,
  TelemetryAttributeValue,
  TelemetryAttributes,
  TelemetrySpan,
  TelemetryTracer,
  TelemetryTracerProvider,
  TelemetryHistogram,
  TelemetryCounter,
  TelemetryObservable,
  TelemetryObservableResult,
  TelemetryInstrumentOptions,
  TelemetryMeter,
  TelemetryMeterProvider,
} from './telemetry/opentelemetry';
