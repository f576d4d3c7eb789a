/**
 * The framework-free engine's public API (re-exported by the package's root entry point): the
 * engine, its options, lock and event types, the errors and the fencing helpers. Internals are
 * imported from their files.
 */
export * from './base/errors';
export { Lock } from './lock/lock';
export type { ReleaseResult, LockOwner, LockedRoutine } from './lock/lock';
export { Redlock } from './redlock';
export { SERIALIZED_LOCK_VERSION } from './lock/portable';
export type { SerializedLock } from './lock/portable';
export { MAX_RESOURCES, MAX_RESOURCE_LENGTH, MAX_LIMIT } from './base/validate';
export type { LockKindName, LockKindSpec } from './base/kind-spec';
export type { FoundKind } from './base/kind-spec';
export { semaphoreQuorum } from './quorum/kind-rules';
export type {
  AcquireOptions,
  UsingOptions,
  MasterHealth,
  RedlockHealth,
  RedlockFootprint,
  ResourceInspection,
  ReleaseOptions,
  ReleaseWait,
} from './base/types';
export { DEFAULT_SETTINGS } from './base/settings';
export type {
  Fairness,
  RedlockClient,
  RedlockLogger,
  RedlockSettings,
  QuarantineSettings,
  ResolvedSettings,
} from './base/settings';
export type { IovalkeyClient, NodeRedisClient, NodeRedisCluster } from './base/client-types';
export type {
  RedlockEvent,
  RedlockObserver,
  AcquiredEvent,
  FailedEvent,
  ExtendedEvent,
  ReleasedEvent,
  LostEvent,
  ClockJumpEvent,
} from './lock/events';
export { fencedWrite, fencedRead } from './redis/fenced-write';
