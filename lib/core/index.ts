/**
 * The framework-free engine's public API (re-exported by the package's root entry point): the
 * engine, its options, lock and event types, the errors and the fencing helpers. Internals are
 * imported from their files.
 */
export * from './errors';
export { Lock } from './lock';
export type { ReleaseResult, LockOwner, LockedRoutine } from './lock';
export { Redlock } from './redlock';
export { SERIALIZED_LOCK_VERSION } from './portable';
export type { SerializedLock } from './portable';
export { MAX_RESOURCES, MAX_RESOURCE_LENGTH, MAX_LIMIT } from './validate';
export type { LockKindName, LockKindSpec } from './kind-spec';
export type { FoundKind } from './kind-spec';
export { semaphoreQuorum } from './kinds/quorum-rule';
export type {
  AcquireOptions,
  UsingOptions,
  MasterHealth,
  RedlockHealth,
  RedlockFootprint,
  ResourceInspection,
  ReleaseOptions,
} from './types';
export { DEFAULT_SETTINGS } from './settings';
export type {
  Fairness,
  RedlockClient,
  RedlockLogger,
  RedlockSettings,
  QuarantineSettings,
  ResolvedSettings,
} from './settings';
export type { IovalkeyClient, NodeRedisClient, NodeRedisCluster } from './connection/client-types';
export type {
  RedlockEvent,
  RedlockObserver,
  AcquiredEvent,
  FailedEvent,
  ExtendedEvent,
  ReleasedEvent,
  LostEvent,
} from './events';
export { fencedWrite, fencedRead } from './fencing';
