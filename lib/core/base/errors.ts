/**
 * Errors thrown by the Redlock engine. They are plain `Error` subclasses that know nothing about
 * transports (HTTP, RPC, ...); the Nest layer maps them. Each carries structured detail so that
 * callers and logs can tell *why* a lock was not granted.
 */
import { formatMs } from './clock';
import type { FoundKind } from './kind-spec';
import type { LockKindSpec } from './kind-spec';

/** How one master answered one request. */
export type NodeOutcome =
  /** The master set (or extended / deleted) the key for us. */
  | 'ok'
  /** The master answered, but another holder owns at least one of the keys (or the key is not ours). */
  | 'held'
  /** The master answered `ok`, but it restarted too recently to be trusted (restart quarantine). */
  | 'quarantined'
  /**
   * Extension only (`repairOnExtend`): the master had lost the key and the extension put it back
   * (`SET NX`, same token) — or did so since the lock's last successful extension. It does not
   * count toward the quorum until a later extension finds the key kept there.
   */
  | 'repaired'
  /** The request failed with an error (connection refused, script error, ...). */
  | 'error'
  /** No answer within the per-node timeout. */
  | 'timeout'
  /** No answer yet when the outcome was already certain (the request is cleaned up later). */
  | 'pending';

/** One master's answer to one request, as recorded in locks and errors. */
export interface NodeVote {
  /** Position of the master in the client list given to the engine. */
  readonly node: number;
  /** Human-readable address of the master, with any password redacted. */
  readonly name: string;
  /** What the master answered. */
  readonly outcome: NodeOutcome;
  /** Milliseconds between sending the request and the answer (or the timeout). */
  readonly latency: number;
  /** Error message for `error` outcomes (never contains credentials). */
  readonly error?: string;
  /** For `held` outcomes of an acquire: the holder's remaining TTL in ms, when known. */
  readonly holderTtl?: number;
  /** For `quarantined` outcomes: at most how many more ms the master's restart quarantine lasts. */
  readonly quarantineRemaining?: number;
}

/** Machine-readable codes of {@link RedlockError}s. */
export type RedlockErrorCode =
  | 'LOCK_CONTENDED'
  | 'NO_QUORUM'
  | 'LOCK_LOST'
  | 'WAIT_TIMEOUT'
  | 'ABORTED'
  | 'EXTENSION_LIMIT'
  | 'SHUTTING_DOWN'
  | 'KIND_MISMATCH'
  | 'INVALID_ARGUMENT'
  | 'INVALID_CONFIGURATION';

/** Detail shared by errors about a lock operation. */
export interface LockErrorDetail {
  /** Resources the operation was about (de-duplicated, sorted). */
  readonly resources: readonly string[];
  /** Per-node answers of the last attempt. */
  readonly votes: readonly NodeVote[];
  /** Number of attempts made. */
  readonly attempts: number;
  /** Milliseconds spent in the whole operation. */
  readonly elapsed: number;
}

/** Base class of every error the engine throws on purpose. */
export abstract class RedlockError extends Error {
  /** Machine-readable code; stable across versions. */
  abstract readonly code: RedlockErrorCode;

  protected constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Base class of errors that describe a lock operation on some resources. */
export abstract class LockOperationError extends RedlockError implements LockErrorDetail {
  readonly resources: readonly string[];
  readonly votes: readonly NodeVote[];
  readonly attempts: number;
  readonly elapsed: number;

  protected constructor(message: string, detail: LockErrorDetail, options?: { cause?: unknown }) {
    super(message, options);
    this.resources = detail.resources;
    this.votes = detail.votes;
    this.attempts = detail.attempts;
    this.elapsed = detail.elapsed;
  }
}

/** Someone else holds (a majority of) the lock. The usual "try again later" outcome. */
export class LockContendedError extends LockOperationError {
  /** Machine-readable kind of the error (stable across versions). */
  readonly code = 'LOCK_CONTENDED' as const;
  /**
   * Best guess, in ms, of when the current holder's lock expires at the latest (the largest TTL a
   * master reported for the holder), or `undefined` when unknown. Suitable for `Retry-After`.
   */
  readonly retryAfter: number | undefined;

  /** Built by the engine with the details of the operation. */
  constructor(detail: LockErrorDetail) {
    super(`Resource ${formatResources(detail.resources)} is locked by another holder`, detail);
    this.retryAfter = holderTtl(detail.votes);
  }
}

/** Why a quorum was not reached although the lock was not (only) contended. */
export type NoQuorumReason =
  /** Too many masters failed, timed out or are in restart quarantine. */
  | 'unavailable'
  /** A quorum answered, but so late that no validity was left (ttl − elapsed − drift ≤ 0). */
  | 'validity-exhausted';

/** Not enough masters could be reached (or too late) to make a majority decision. */
export class NoQuorumError extends LockOperationError {
  /** Machine-readable kind of the error (stable across versions). */
  readonly code = 'NO_QUORUM' as const;
  /** Why no usable quorum was reached. */
  readonly reason: NoQuorumReason;
  /** Votes needed. */
  readonly quorum: number;

  /** Built by the engine with the details of the operation. */
  constructor(detail: LockErrorDetail & { reason: NoQuorumReason; quorum: number }) {
    super(
      detail.reason === 'validity-exhausted'
        ? `Quorum for ${formatResources(detail.resources)} came too late: no validity left`
        : `No quorum for ${formatResources(detail.resources)}: ${countOk(detail.votes)} of ${detail.votes.length} masters usable, ${detail.quorum} needed (${summarizeVotes(detail.votes)})`,
      detail,
    );
    this.reason = detail.reason;
    this.quorum = detail.quorum;
  }
}

/** The lock is no longer held: it expired, was lost on a majority, or an extension failed. */
export class LockLostError extends LockOperationError {
  /** Machine-readable kind of the error (stable across versions). */
  readonly code = 'LOCK_LOST' as const;

  /** Built by the engine with the details of the operation. */
  constructor(detail: LockErrorDetail, why: string, cause?: unknown) {
    super(
      `Lock on ${formatResources(detail.resources)} lost: ${why}`,
      detail,
      cause === undefined ? undefined : { cause },
    );
  }
}

/** `acquire` gave up because its `waitTimeout` elapsed. */
export class WaitTimeoutError extends LockOperationError {
  /** Machine-readable kind of the error (stable across versions). */
  readonly code = 'WAIT_TIMEOUT' as const;
  /** The deadline that elapsed, in ms. */
  readonly waitTimeout: number;

  /** Built by the engine with the details of the operation. */
  constructor(detail: LockErrorDetail & { waitTimeout: number }, options?: { cause?: unknown }) {
    super(
      `Gave up waiting for ${formatResources(detail.resources)} after ${detail.waitTimeout} ms`,
      detail,
      options,
    );
    this.waitTimeout = detail.waitTimeout;
  }
}

/** A pending `acquire` was cancelled through its AbortSignal. */
export class LockAbortedError extends LockOperationError {
  /** Machine-readable kind of the error (stable across versions). */
  readonly code = 'ABORTED' as const;

  /** Built by the engine with the details of the operation. */
  constructor(detail: LockErrorDetail, options?: { cause?: unknown }) {
    super(`Acquisition of ${formatResources(detail.resources)} was aborted`, detail, options);
  }
}

/** `extend` was called more often than the `maxExtensions` setting allows. */
export class ExtensionLimitError extends LockOperationError {
  /** Machine-readable kind of the error (stable across versions). */
  readonly code = 'EXTENSION_LIMIT' as const;
  /** The limit that was reached. */
  readonly maxExtensions: number;

  /** Built by the engine with the details of the operation. */
  constructor(detail: LockErrorDetail & { maxExtensions: number }) {
    super(
      `Lock on ${formatResources(detail.resources)} reached its limit of ${detail.maxExtensions} extensions`,
      detail,
    );
    this.maxExtensions = detail.maxExtensions;
  }
}

/**
 * The engine no longer takes new locks: it is draining for shutdown (`drain()`, `close()`, or the
 * Nest application shutting down). Pending acquisitions end with it at once; locks already held
 * keep working (extend, release) until they are released.
 */
export class ShuttingDownError extends LockOperationError {
  /** Machine-readable kind of the error (stable across versions). */
  readonly code = 'SHUTTING_DOWN' as const;

  /** Built by the engine with the details of the operation. */
  constructor(detail: LockErrorDetail) {
    super(
      `No new lock on ${formatResources(detail.resources)}: the lock service is shutting down`,
      detail,
    );
  }
}

/** What a master found at a resource's key that another kind of lock holds. */
export type FoundLockKind = Exclude<FoundKind, { kind: 'none' }>;

/**
 * The resource is held with another kind of lock than the one requested: a plain lock, shared
 * (read) locks or a semaphore with another `limit` — or a key the engine did not write. Kinds never
 * mix on one resource; this is a programming error, not contention: it is thrown at once (never
 * retried, whatever `retryCount` or `waitTimeout` say), after the attempt's own keys — if any
 * master had granted — were deleted again. One master reporting the other kind is enough: the keys
 * are the engine's own, and a kind that is there on one master was requested by someone.
 */
export class KindMismatchError extends LockOperationError {
  /** Machine-readable kind of the error (stable across versions). */
  readonly code = 'KIND_MISMATCH' as const;
  /** The kind that was requested. */
  readonly requested: LockKindSpec;
  /** The kind a master found at the key (`foreign`: something the engine did not write). */
  readonly found: FoundLockKind;

  /** Built by the engine with the details of the operation. */
  constructor(detail: LockErrorDetail & { requested: LockKindSpec; found: FoundLockKind }) {
    super(
      `Resource ${formatResources(detail.resources)} is held as ${foundText(detail.found)}; a ${kindText(detail.requested)} lock cannot be taken on it (kinds never mix on one resource)`,
      detail,
    );
    this.requested = detail.requested;
    this.found = detail.found;
  }
}

function kindText(k: { kind?: string; name?: string; limit?: number }): string {
  const name = k.kind ?? k.name;
  return name === 'semaphore' ? `semaphore (limit ${k.limit})` : String(name);
}

function foundText(found: FoundLockKind): string {
  switch (found.kind) {
    case 'mutex':
      return 'a plain (exclusive) lock';
    case 'shared':
      return 'shared (read) locks';
    case 'semaphore':
      return `a semaphore with limit ${found.limit}`;
    default:
      return `a foreign Redis ${found.redisType} key`;
  }
}

/** A call received an invalid argument. Thrown before any Redis call is made. */
export class InvalidArgumentError extends RedlockError {
  /** Machine-readable kind of the error (stable across versions). */
  readonly code = 'INVALID_ARGUMENT' as const;
  /** Name of the offending argument or option, e.g. `ttl` or `resources[2]`. */
  readonly field: string;

  /** `field`: the setting or argument at fault; `problem`: what is wrong with it. */
  constructor(field: string, problem: string) {
    super(`Invalid argument "${field}": ${problem}`);
    this.field = field;
  }
}

/**
 * `restore(data)` was given something that is not a serialized lock (`lock.toJSON()`) this engine
 * can take over: wrong types, missing or unknown fields, an unknown version or kind, a malformed
 * token, invalid resources or fencing tokens, another key prefix, a ttl beyond this engine's
 * limits. An {@link InvalidArgumentError} (code `INVALID_ARGUMENT`); `field` names the first bad
 * field, e.g. `data.token`.
 */
export class InvalidLockDataError extends InvalidArgumentError {
  /** `field`: the field of the data at fault; `problem`: what is wrong with it. */
  constructor(field: string, problem: string) {
    super(field, problem);
  }
}

/** The engine (or module) settings are invalid. Thrown at construction / bootstrap. */
export class InvalidConfigurationError extends RedlockError {
  /** Machine-readable kind of the error (stable across versions). */
  readonly code = 'INVALID_CONFIGURATION' as const;
  /** Name of the offending setting, e.g. `driftFactor` or `clients[1]`. */
  readonly field: string;

  /** `field`: the setting or argument at fault; `problem`: what is wrong with it. */
  constructor(field: string, problem: string) {
    super(`Invalid Redlock configuration "${field}": ${problem}`);
    this.field = field;
  }
}

function formatResources(resources: readonly string[]): string {
  const shown = resources
    .slice(0, 5)
    .map((r) => JSON.stringify(r.length > 80 ? `${r.slice(0, 77)}...` : r));
  return resources.length > 5
    ? `[${shown.join(', ')}, +${resources.length - 5} more]`
    : shown.join(', ');
}

function countOk(votes: readonly NodeVote[]): number {
  return votes.filter((v) => v.outcome === 'ok').length;
}

function summarizeVotes(votes: readonly NodeVote[]): string {
  const counts = new Map<string, number>();
  let quarantine = 0;
  for (const v of votes) {
    counts.set(v.outcome, (counts.get(v.outcome) ?? 0) + 1);
    if (v.quarantineRemaining !== undefined)
      quarantine = Math.max(quarantine, v.quarantineRemaining);
  }
  return [...counts]
    .map(([k, n]) =>
      k === 'quarantined' && quarantine > 0
        ? `${n} ${k} for up to ${formatMs(quarantine)} more`
        : `${n} ${k}`,
    )
    .join(', ');
}

function holderTtl(votes: readonly NodeVote[]): number | undefined {
  let max: number | undefined;
  for (const v of votes) {
    if (v.outcome === 'held' && v.holderTtl !== undefined && v.holderTtl >= 0) {
      max = Math.max(max ?? 0, v.holderTtl);
    }
  }
  return max;
}
