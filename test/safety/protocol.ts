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
 * Hash on the counter server written through the engine's `fencedWrite` (fields `fencingToken`
 * and `value`): the fenced resource. Its accepted writes are recorded in server order by the
 * controller (MONITOR) for the checker.
 */
export const FENCED_KEY = 'safety:fenced';

/**
 * Kind of critical section a worker runs next:
 * - `normal`: short work with the default ttl, sometimes followed by one `extend()`;
 * - `long`: a long-ish ttl and work close to it, with one `extend()` half-way; the controller
 *   restarts masters under it;
 * - `auto`: work longer than the ttl, kept alive by `using()`'s automatic extension;
 * - `hold`: medium work with the default ttl; the controller SIGSTOPs the worker past its ttl;
 * - `probe`: a short section of the worker's second engine, which contends for the resource (for
 *   at most {@link TIMING}.probeWait) when the controller asks, right after a fault aimed at a
 *   holder (a restart, a clock jump).
 */
export type SectionMode = 'normal' | 'auto' | 'long' | 'hold' | 'probe';

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
  /** How far the clock faults move a master's wall clock (ms). */
  clockJump: 30_000,
  /** How long a probe (a contender's fresh attempt after a clock jump) may wait (ms). */
  probeWait: 400,
} as const;

/** Configuration passed to a worker process (JSON in the `REDLOCK_SAFETY_WORKER` variable). */
export interface WorkerConfig {
  /** Worker id (0-based). */
  readonly id: number;
  /**
   * Ports on 127.0.0.1 through which this worker reaches the 5 masters, in master order: its own
   * link proxies (test/harness/faults/link-proxy.ts), one per master.
   */
  readonly masterPorts: readonly number[];
  /** Port of the counter server on 127.0.0.1. */
  readonly counterPort: number;
  /** Pass `quarantine: false` to the engine (the deliberately broken variant). */
  readonly noQuarantine: boolean;
  /** The engine's `fairness` setting (both modes must keep every safety property). */
  readonly fairness: 'local' | 'across-processes';
  /**
   * `false`: pass `clockCheck: false` to the engines (the deliberately broken variant for the
   * clock faults). `true`: the engine's default.
   */
  readonly clockCheck: boolean;
  /** Seed of this worker's own random choices (section modes, work lengths). */
  readonly seed: number;
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

/** Outcome of the fenced write (`fencedWrite`) at the end of every section. */
export type FencedOutcome =
  /** `fencedWrite` stored the value: no newer token had written. */
  | 'accepted'
  /** `fencedWrite` refused it: a write with an equal or newer token was already accepted. */
  | 'refused'
  /** The section had no fencing token (fencing off). */
  | 'none'
  /** The call failed. */
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
  /**
   * The fenced write, made at the end of every section whatever the signal says (a holder that
   * lost its lock without knowing it is exactly what fencing is for).
   */
  readonly fenced: FencedOutcome;
  /** Monotonic ms when the fenced write was sent (null when none was). */
  readonly fencedAt: number | null;
  readonly error: string | null;
}

/** An acquire gave up (error name), e.g. while a majority was in quarantine. */
export interface FailEvent {
  readonly ev: 'fail';
  readonly worker: number;
  readonly t: number;
  readonly error: string;
}

/** How a probe the controller asked for (after a restart or a clock jump) ended. */
export interface ProbeEvent {
  readonly ev: 'probe';
  readonly worker: number;
  /** Monotonic ms when the probe's attempt began. */
  readonly t: number;
  /** Whether the probe used an engine created for it (no earlier clock samples) or a warm one. */
  readonly fresh: boolean;
  /** `granted` (its section is logged with mode `probe`), or the error name of its refusal. */
  readonly outcome: string;
}

/** A warning of one of the worker's engines (its logger), e.g. a master's clock found jumping. */
export interface WarnEvent {
  readonly ev: 'warn';
  readonly worker: number;
  /** `main`, `probe` (the warm probe) or `fresh` (an engine made for one probe). */
  readonly engine: 'main' | 'probe' | 'fresh';
  readonly t: number;
  readonly message: string;
}

/** Any line of a worker log. */
export type WorkerEvent = EnterEvent | ExitEvent | FailEvent | ProbeEvent | WarnEvent;

/** Kinds of injected faults (see controller.ts). */
export type FaultKind =
  | 'restart-majority'
  | 'bare-majority-restart'
  | 'pause-master'
  | 'pause-holder'
  | 'minority-down'
  | 'pause-worker'
  | 'partition-minority'
  | 'partition-majority'
  | 'clock-jump'
  | 'clock-jump-back';

/** All fault kinds, in the order the controller cycles through them. */
export const FAULT_KINDS: readonly FaultKind[] = [
  'restart-majority',
  'partition-minority',
  'pause-master',
  'clock-jump',
  'bare-majority-restart',
  'partition-majority',
  'pause-holder',
  'clock-jump-back',
  'minority-down',
  'pause-worker',
];

/** Faults aimed at the holder of a `long` section (REDLOCK.md, "Crash recovery"). */
export const CRASH_RECOVERY_FAULTS = ['restart-majority', 'bare-majority-restart'] as const;

/** Faults that move a master's wall clock under a holder (need the masters under the shim). */
export const CLOCK_FAULTS = ['clock-jump', 'clock-jump-back'] as const;

/** Faults that cut one worker's links to some masters (its link proxies). */
export const PARTITION_FAULTS = ['partition-minority', 'partition-majority'] as const;

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
  /**
   * Master indexes cut off while the holder acquired (`bare-majority-restart`: they refused
   * scripts; clock faults: the holder's links to them refused connections), or the masters a
   * partition fault cut the worker off from.
   */
  readonly partitioned: readonly number[];
  /** Worker involved (holder of a `long` or `hold` section, the partitioned worker). */
  readonly worker: number | null;
  /** Section of that worker during which the fault was injected. */
  readonly seq: number | null;
  /** Partition faults: what the cut links did (`blackhole-both-hold`, `refuse`, ...). */
  readonly link?: string;
  /** Clock faults: the jumped master's offset during the fault (ms; set back at its end), and the jump. */
  readonly clock?: { readonly offsetMs: number; readonly jumpMs: number };
  /** Clock faults: the worker asked to contend right after the jump, and with which engine. */
  readonly probe?: { readonly worker: number; readonly fresh: boolean };
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
  | { readonly type: 'exit'; readonly seq: number }
  | ProbeDone;

/** Messages from the controller to a worker. */
export type ControllerMessage =
  | { readonly type: 'mode'; readonly mode: SectionMode }
  | { readonly type: 'probe'; readonly fresh: boolean }
  | { readonly type: 'stop' };

/** A worker's answer to a `probe` request (sent once the probe has ended). */
export interface ProbeDone {
  readonly type: 'probed';
  readonly outcome: string;
}

/**
 * A small seeded pseudo-random generator (mulberry32): the soak's random choices (fault order
 * details, targets, durations, section modes) follow from the seed printed with the report. The
 * timing of processes is not reproducible, so neither is a run; the seed reproduces the choices.
 */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Milliseconds on the system-wide monotonic clock (comparable across processes on one host). */
export function monoMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}
