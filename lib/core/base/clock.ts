import { performance } from 'node:perf_hooks';
import { onAbort } from './wake';

/**
 * Time in the engine: the monotonic clock all validity arithmetic reads, the drift allowance,
 * delays, and the {@link Timeline} that keeps many deadlines on one timer.
 */

/**
 * Largest delay Node's timers accept (2^31 − 1 ms; larger values fire after 1 ms): the bound of
 * every ttl, delay and deadline the engine accepts, which all end up in a timer.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Milliseconds from a monotonic clock. Never goes backwards when the wall clock is adjusted;
 * all elapsed-time and validity arithmetic in the engine uses it (docs/REDLOCK.md, "N masters", step 1).
 */
export function monotonicNow(): number {
  return performance.now();
}

/**
 * Resolves after `ms`, or rejects with the signal's reason once it aborts. Leaves no timer. Any
 * number of concurrent delays may share one signal (see {@link onAbort}).
 */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      stop();
      resolve();
    }, ms);
    const stop = signal
      ? onAbort(signal, () => {
          clearTimeout(timer);
          reject(signal.reason);
        })
      : () => undefined;
  });
}

/**
 * Calls `fn` once the I/O that is already waiting has been read: from the event loop's check
 * phase, which follows its poll phase (a busy process must not turn its own backlog
 * into missed per-node timeouts: test/core/busy-loop.spec.ts). A timer that comes due while the loop was blocked
 * fires in the timers phase, before the poll phase reads the sockets; replies that arrived
 * meanwhile, inside the per-node timeout, would be counted as timeouts. Per-node timeouts end
 * through this: the replies already received are counted first. It adds one loop turn (no I/O
 * wait: the poll phase does not block while a check callback is pending), nothing on an idle loop.
 */
export function afterPendingIo(fn: () => void): void {
  setImmediate(fn);
}

/** A duration for humans: `850 ms`, `3 s` (rounded up). */
export function formatMs(ms: number): string {
  return ms < 1000 ? `${Math.ceil(ms)} ms` : `${Math.ceil(ms / 1000)} s`;
}

/**
 * Drift allowance for a ttl (docs/REDLOCK.md, "N masters" step 4): ttl × driftFactor + 2 ms —
 * how far the masters' and this process's clocks may disagree over the ttl.
 */
export function driftFor(ttl: number, driftFactor: number): number {
  return Math.floor(ttl * driftFactor) + 2;
}

/** A scheduled call on a {@link Timeline}. */
export interface TimelineEntry {
  /** Monotonic time (ms) at which it is due. */
  readonly at: number;
  /** Position in the heap; -1 once it fired or was removed. */
  index: number;
  readonly fire: () => void;
}

/**
 * Many deadlines, one timer: an indexed binary min-heap of due times and a single `setTimeout`
 * for the earliest one. Sleeping acquires (however many: 10,000 waiters on one resource) cost a
 * heap slot each, not a timer each; removing a deadline is O(log n). No timer is left armed
 * once the heap is empty — unless `keepArmed`: then the timer stays, unref'd (it never holds the
 * process), and the next deadline that is not earlier reuses it. For short deadlines that come
 * one after another (a voting round's per-node timeout, set and cancelled a few hundred µs
 * later), that is one `setTimeout` per timeout period instead of a `setTimeout` and a
 * `clearTimeout` per round; a timer that fires before the earliest deadline re-arms for it.
 */
export class Timeline {
  private readonly heap: TimelineEntry[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** Monotonic time the armed timer was set for (Infinity when none). */
  private armedFor = Infinity;
  /** Whether the armed timer holds the process (false while kept armed over an empty heap). */
  private refd = false;

  /** @param keepArmed keep the timer (unref'd) when the heap empties; see the class comment. */
  constructor(private readonly keepArmed = false) {}

  /** Number of pending deadlines. */
  get size(): number {
    return this.heap.length;
  }

  /** Calls `fire` at monotonic time `at` (at once, from the timer, when it already passed). */
  add(at: number, fire: () => void): TimelineEntry {
    const entry: TimelineEntry = { at, index: this.heap.length, fire };
    this.heap.push(entry);
    this.up(entry.index);
    this.arm();
    return entry;
  }

  /** Cancels `entry` (no effect when it already fired or was removed). */
  remove(entry: TimelineEntry): void {
    const i = entry.index;
    if (i < 0) return;
    entry.index = -1;
    const last = this.heap.pop() as TimelineEntry;
    if (last !== entry) {
      this.heap[i] = last;
      last.index = i;
      this.down(i);
      this.up(last.index);
    }
    // A timer armed for a removed entry may fire early and re-arm; none stays once empty
    // (kept, unref'd, with `keepArmed`).
    if (this.heap.length === 0) this.idle();
  }

  /** Drops every deadline without calling it and stops the timer. */
  clear(): void {
    for (const e of this.heap) e.index = -1;
    this.heap.length = 0;
    this.disarm();
  }

  private arm(): void {
    const first = this.heap[0];
    if (!first) return this.idle();
    if (this.timer && this.armedFor <= first.at) {
      if (!this.refd) {
        this.timer.ref();
        this.refd = true;
      }
      return;
    }
    this.disarm();
    this.armedFor = first.at;
    // Rounded up: a timer never fires before the deadline it was set for.
    const ms = Math.min(MAX_TIMER_MS, Math.max(0, Math.ceil(first.at - monotonicNow())));
    this.timer = setTimeout(this.run, ms);
    this.refd = true;
  }

  /** The heap is empty: no timer, or (`keepArmed`) the armed one unref'd. */
  private idle(): void {
    if (!this.keepArmed || !this.timer) return this.disarm();
    if (this.refd) {
      this.timer.unref();
      this.refd = false;
    }
  }

  private disarm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.armedFor = Infinity;
    this.refd = false;
  }

  private readonly run = (): void => {
    this.timer = undefined;
    this.armedFor = Infinity;
    this.refd = false;
    const now = monotonicNow();
    while (this.heap.length > 0 && this.heap[0].at <= now) {
      const first = this.heap[0];
      this.remove(first);
      first.fire();
    }
    this.arm();
  };

  private up(i: number): void {
    const h = this.heap;
    const e = h[i];
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (h[p].at <= e.at) break;
      h[i] = h[p];
      h[i].index = i;
      i = p;
    }
    h[i] = e;
    e.index = i;
  }

  private down(i: number): void {
    const h = this.heap;
    const n = h.length;
    const e = h[i];
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && h[r].at < h[l].at ? r : l;
      if (h[c].at >= e.at) break;
      h[i] = h[c];
      h[i].index = i;
      i = c;
    }
    h[i] = e;
    e.index = i;
  }
}
