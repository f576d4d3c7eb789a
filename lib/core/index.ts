export * from './errors';
export { Lock } from './lock';
export type { ReleaseResult, LockOwner } from './lock';
export { Redlock, MAX_RESOURCES, MAX_RESOURCE_LENGTH, normalizeResources } from './redlock';
export type {
  AcquireOptions,
  UsingOptions,
  LockedRoutine,
  MasterHealth,
  RedlockHealth,
} from './redlock';
export { DEFAULT_SETTINGS, driftFor } from './settings';
export type {
  RedlockClient,
  RedlockLogger,
  RedlockSettings,
  QuarantineSettings,
  ResolvedSettings,
} from './settings';
export { monotonicNow } from './clock';
export { keySlot } from './masters/slots';
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
