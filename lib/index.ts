/**
 * nestjs-redlock public API.
 * @packageDocumentation
 */
export * from './core';
export * from './interfaces';
export * from './errors';
export * from './decorators';
export * from './interceptors';
export {
  LOCKED_METADATA,
  REDLOCK_MODULE_OPTIONS,
  REDLOCK_LOGGER_CONTEXT,
} from './redlock.constants';
export * from './redlock.messages';
export { RedlockModule } from './redlock.module';
export type {
  RedlockModuleExtras,
  RedlockModuleForRootOptions,
  RedlockModuleAsyncOptions,
} from './redlock.module-definition';
export { RedlockService } from './redlock.service';
export type { LockedEntry, EnterLockedOptions } from './redlock.service';
export {
  normalizeOptions,
  LOCK_FRIENDLY_CLIENT_OPTIONS,
  DEFAULT_SHUTDOWN_TIMEOUT,
} from './options';
export { redactUrl, redactText, isClientInstance } from './clients';
export { LockedExplorer } from './locked.explorer';
export { logLockEvents, NO_QUORUM_LOG_INTERVAL } from './redlock.logging';
export {
  instrumentRedlock,
  checkTelemetryOptions,
  loadOpenTelemetry,
  TELEMETRY_SCOPE,
} from './telemetry/opentelemetry';
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
