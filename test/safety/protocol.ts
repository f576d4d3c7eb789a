/**
 * Shared vocabulary of the safety soak: the worker configuration, the log lines written by the
 * workers and the controller, the IPC messages between them, and the clock they all use.
 *
 * Clock: every time in the logs (`t`, `start`, `end`, `validityEnd`, ...) is read from the
 * system-wide monotonic clock (`process.hrtime`, CLOCK_MONOTONIC on Linux, the same source as the
 * engine's `performance.now()`), in milliseconds. All processes of a soak run on one machine, so
 * these readings are directly comparable across processes and immune to wall-clock steps.
 * `wall` fields carry `Date.now()` of the same instant, for humans reading the logs.
 */

/** Resource every worker contends for. */
export const RESOURCE = 'safety-soak';
/** Key prefix of the engine (lock keys, fencing counters, boot markers) on the masters. */
export const KEY_PREFIX = 'safety:';
/** Counter key on the separate counter server (never one of the masters). */
export const COUNTER_KEY = 'safety:counter';
/** Key on the counter server counting the writes the server accepted. */
export const ACCEPTED_KEY = 'safety:accepted';

/**
 * Kind of critical section a worker runs next:
 * - `normal`: short work with the default ttl, sometimes followed by one `extend()`;
 * - `long`: a long-ish ttl and work close to it, with one `extend()` half-way; the controller
 *   restarts masters under it;
 * - `auto`: work longer than the ttl, kept alive by `using()`'s automatic extension;
 * - `hold`: medium work with the default ttl; the controller SIGSTOPs the worker past its ttl.
 */
export type SectionMode = 'normal' | 'auto' | 'long' | 'hold';

/** Lock timing used by the workers (ms). */
export const TIMING = {
  /** Engine `maxTtl`: bounds the quarantine (maxTtl × (1 + driftFactor) + 2). */
  maxTtl: 2000,
  /** ttl of `normal` and `hold` sections. */
  ttl: 400,
  /** ttl of `long` sections. */
  longTtl: 1500,
  /** Work of a `long` section. */
  longWork: 1200,
  /** Work of a `hold` section (the worker is paused during it). */
  holdWork: 250,
  /** Work of an `auto` section (extended automatically by `using()`). */
  autoWork: 500,
  /** Share of the workers' own sections that are `auto`. */
  autoShare: 0.04,
  /** How long a paused holder stays stopped: past the whole ttl. */
  holderPause: 700,
} as const;

/** Configuration passed to a worker process (JSON in the `REDLOCK_SAFETY_WORKER` variable). */
export interface WorkerConfig {
  /** Worker id (0-based). */
  readonly id: number;
  /** Ports of the 5 masters on 127.0.0.1. */
  readonly masterPorts: readonly number[];
  /** Port of the counter server on 127.0.0.1. */
  readonly counterPort: number;
  /** Pass `quarantine: false` to the engine (the deliberately broken variant). */
  readonly noQuarantine: boolean;
  /** The engine's `fairness` setting (both modes must keep every safety property). */
  readonly fairness: 'local' | 'across-processes';
  /** Append-only JSON-lines log of this worker. */
  readonly logFile: string;
}

/** Name of the environment variable carrying a worker's {@link WorkerConfig}. */
export const WORKER_ENV = 'REDLOCK_SAFETY_WORKER';

/** Outcome of the counter write at the end of a critical section. */
export type WriteOutcome =
  /** The counter server accepted the write. */
  | 'ok'
  /** The worker saw (through `lock.signal`) that its lock had ended and did not write. */
  | 'skipped'
  /** The counter server refused it: it arrived after the lock's validity end. */
  | 'refused'
  /** The read or write failed. */
  | 'error';

/** A worker entered a critical section (written before any work). */
export interface EnterEvent {
  readonly ev: 'enter';
  readonly worker: number;
  readonly seq: number;
  readonly mode: SectionMode;
  readonly ttl: number;
  /** Monotonic ms at entry into the routine. */
  readonly start: number;
  readonly wall: number;
  /** `start + lock.remainingValidity` read at entry. */
  readonly validityEnd: number;
  readonly fencingToken: number | null;
  /** Masters that voted `ok` in the winning attempt. */
  readonly okMasters: readonly number[];
  readonly attempts: number;
}

/** A worker left a critical section. */
export interface ExitEvent {
  readonly ev: 'exit';
  readonly worker: number;
  readonly seq: number;
  /** Monotonic ms when the routine finished (before the release). */
  readonly end: number;
  readonly wall: number;
  /**
   * Latest validity end the lock promised (`now + lock.remainingValidity`, read at entry, after
   * every extension, during `auto` work, before the write and at the end).
   */
  readonly validityEnd: number;
  /** `lock.signal.aborted` at the end of the section. */
  readonly aborted: boolean;
  /** When the abort event fired, if it did (monotonic ms). */
  readonly abortedAt: number | null;
  readonly abortReason: string | null;
  readonly extensions: number;
  /** Failed `extend()` calls (error name). */
  readonly extendError: string | null;
  /** Counter value read at the start of the section. */
  readonly read: number | null;
  readonly write: WriteOutcome;
  readonly error: string | null;
}

/** An acquire gave up (error name), e.g. while a majority was in quarantine. */
export interface FailEvent {
  readonly ev: 'fail';
  readonly worker: number;
  readonly t: number;
  readonly error: string;
}

/** Any line of a worker log. */
export type WorkerEvent = EnterEvent | ExitEvent | FailEvent;

/** Kinds of injected faults (see controller.ts). */
export type FaultKind =
  | 'restart-majority'
  | 'bare-majority-restart'
  | 'pause-master'
  | 'pause-holder'
  | 'minority-down'
  | 'pause-worker';

/** All fault kinds, in the order the controller cycles through them. */
export const FAULT_KINDS: readonly FaultKind[] = [
  'restart-majority',
  'pause-master',
  'bare-majority-restart',
  'pause-holder',
  'minority-down',
  'pause-worker',
];

/** Faults aimed at the holder of a `long` section (REDLOCK.md, "Crash recovery"). */
export const CRASH_RECOVERY_FAULTS = ['restart-majority', 'bare-majority-restart'] as const;

/** One injected fault, as logged by the controller. */
export interface FaultEvent {
  readonly ev: 'fault';
  readonly kind: FaultKind;
  /** Monotonic ms when the fault began. */
  readonly t: number;
  readonly wall: number;
  /** How long the fault lasted (ms). */
  readonly duration: number;
  /** Master indexes killed, paused or restarted. */
  readonly masters: readonly number[];
  /** Master indexes that refused scripts while the holder acquired (`bare-majority-restart`). */
  readonly partitioned: readonly number[];
  /** Worker involved (holder of a `long` or `hold` section). */
  readonly worker: number | null;
  /** Section of that worker during which the fault was injected. */
  readonly seq: number | null;
}

/** Messages from a worker to the controller. */
export type WorkerMessage =
  | { readonly type: 'ready' }
  | {
      readonly type: 'enter';
      readonly seq: number;
      readonly mode: SectionMode;
      readonly okMasters: readonly number[];
    }
  | { readonly type: 'exit'; readonly seq: number };

/** Messages from the controller to a worker. */
export type ControllerMessage =
  { readonly type: 'mode'; readonly mode: SectionMode } | { readonly type: 'stop' };

/** Milliseconds on the system-wide monotonic clock (comparable across processes on one host). */
export function monoMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}
